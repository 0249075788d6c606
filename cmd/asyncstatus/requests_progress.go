package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/asyncstatus/asyncstatus/client"
)

// progressView shows the states `requests wait` sees on stderr: on a terminal
// a bar that redraws itself in place, elsewhere (a file, a pipe, CI logs) one
// line per change.
type progressView struct {
	w     io.Writer
	tty   bool
	width int
	drawn bool
}

// barCells is the width of the bar itself.
const barCells = 30

func newProgressView(w io.Writer) *progressView {
	v := &progressView{w: w}
	if f, ok := w.(*os.File); ok {
		v.width, v.tty = terminalWidth(f)
	}
	return v
}

func (v *progressView) update(r *client.Request) {
	if !v.tty {
		fmt.Fprintln(v.w, strings.TrimRight(fmt.Sprintf("%s %s %s", stamp(r.UpdatedAt), r.Status, progressText(r.Progress, "")), " "))
		return
	}
	// carriage return, clear the line, draw: the bar replaces itself
	fmt.Fprint(v.w, "\r\x1b[K"+clip(bar(r), v.width-1))
	v.drawn = true
}

// end leaves the last bar on its own line.
func (v *progressView) end() {
	if v.tty && v.drawn {
		fmt.Fprintln(v.w)
	}
}

// bar is "[##########--------------------]  33% processing page 1 of 3".
func bar(r *client.Request) string {
	pct := -1
	if r.Progress != nil && r.Progress.Percent != nil {
		pct = *r.Progress.Percent
	}
	if r.Status == client.StatusSucceeded {
		pct = 100
	}
	cells, num := strings.Repeat("-", barCells), " --%"
	if pct >= 0 {
		n := pct * barCells / 100
		cells, num = strings.Repeat("#", n)+strings.Repeat("-", barCells-n), fmt.Sprintf("%3d%%", pct)
	}
	s := fmt.Sprintf("[%s] %s %s", cells, num, r.Status)
	if r.Progress != nil && r.Progress.Message != "" {
		s += " " + r.Progress.Message
	}
	return s
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
