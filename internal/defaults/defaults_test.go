package defaults_test

import (
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/defaults"
)

// TestSlicesAreFresh: the schedules are the same in both forms, and a caller
// that changes its copy (config.Defaults promises a modifiable copy) changes
// nobody else's.
func TestSlicesAreFresh(t *testing.T) {
	secs, durs := defaults.PollScheduleSeconds(), defaults.PollSchedule()
	if len(secs) == 0 || len(secs) != len(durs) {
		t.Fatalf("schedules %v and %v", secs, durs)
	}
	for i := range secs {
		if time.Duration(secs[i])*time.Second != durs[i] {
			t.Fatalf("step %d: %ds against %v", i, secs[i], durs[i])
		}
	}
	secs[0], durs[0] = 999, time.Hour
	retry := defaults.WebhookRetrySchedule()
	retry[0] = time.Hour
	if defaults.PollScheduleSeconds()[0] == 999 || defaults.PollSchedule()[0] == time.Hour || defaults.WebhookRetrySchedule()[0] == time.Hour {
		t.Fatal("a changed copy reached the next caller")
	}
}
