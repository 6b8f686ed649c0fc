package testsupport

// Env returns a lookup of environment variables, such as the getenv the settings parsers
// take, that reads m: a variable m lacks is unset.
func Env(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}
