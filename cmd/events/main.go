// Command events writes the sample events of events/ for `sam local invoke -e`, signed now with
// the development secrets, and events/env.json for `sam local invoke --env-vars` and
// `sam local start-api --env-vars`:
//
//	go run ./cmd/events -dir events     # make events
//
// Stripe, Standard Webhooks and Slack sign a timestamp that the functions accept for 5
// minutes, so their files are refused (401) after that: run it again right before invoking.
// The routes and logical IDs come from the SAM template (-template).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/pkg/webhook"
)

func main() {
	dir := flag.String("dir", "events", "directory to write the events and "+samples.EnvFile+" into")
	template := flag.String("template", "template.yaml", "SAM template whose routes and functions the events are for")
	flag.Parse()
	if err := run(*template, *dir, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		os.Exit(1)
	}
}

func run(templatePath, dir string, now time.Time) error {
	t, all, err := samples.Load(templatePath)
	if err != nil {
		return err
	}
	written, err := samples.WriteAll(t, dir, now)
	if err != nil {
		return err
	}
	for _, s := range all {
		expiry := ""
		if s.Timestamped && s.Status < 400 {
			expiry = ", signature expires " + now.Add(webhook.DefaultTolerance).Format("15:04:05")
		}
		fmt.Printf("%-48s %-24s %-24s -> %d%s\n", filepath.Join(dir, s.File), s.Route.Function, s.Route.Key(), s.Status, expiry)
	}
	fmt.Printf("%-48s --env-vars for sam local (REDIS_URL %s)\n", filepath.Join(dir, samples.EnvFile), samples.DockerHostRedisURL)
	fmt.Printf("%d files written, signed at %s\n", len(written), now.Format(time.RFC3339))
	return nil
}
