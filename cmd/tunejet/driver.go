package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/tune"
)

// driverFlag is the hidden --driver-fds R,W of run and restore: the file
// descriptors of the pipes a driver (the Python Tuner.fit()) passed this
// process, over which it gets the experiment's events for its callbacks
// and acknowledges them (docs/driver.md).
type driverFlag struct{ fds string }

func (f *driverFlag) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.fds, "driver-fds", "", "R,W: inherited pipes to a driver that runs callbacks (docs/driver.md)")
	_ = cmd.Flags().MarkHidden("driver-fds")
}

// options is tune.WithDriver over the pipes, none without the flag.
func (f *driverFlag) options() ([]tune.Option, error) {
	if f.fds == "" {
		return nil, nil
	}
	r, w, ok := strings.Cut(f.fds, ",")
	if !ok {
		return nil, fmt.Errorf("--driver-fds %q: want R,W, two file descriptors", f.fds)
	}
	var files [2]*os.File
	for i, s := range []string{r, w} {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return nil, fmt.Errorf("--driver-fds %q: %q is not an inherited file descriptor", f.fds, s)
		}
		// Not passed on to the trials this process starts: the driver
		// sees the pipe's end when this process ends.
		syscall.CloseOnExec(fd)
		if files[i] = os.NewFile(uintptr(fd), "driver-"+s); files[i] == nil {
			return nil, fmt.Errorf("--driver-fds %q: %d is not open", f.fds, fd)
		}
		if _, err := files[i].Stat(); err != nil {
			return nil, fmt.Errorf("--driver-fds %q: %w", f.fds, err)
		}
	}
	return []tune.Option{tune.WithDriver(files[0], files[1])}, nil
}
