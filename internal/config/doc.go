// Package config maps the functions' environment variables to the library's options; its
// errors name the variable (a *setting.Error, found with errors.As), so a function's init can
// say which setting is at fault. The public packages take options only and never read the
// environment: this package is where a variable becomes an option.
package config
