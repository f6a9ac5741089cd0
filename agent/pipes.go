package agent

import (
	"fmt"
	"os"
	"syscall"
)

// userPipes makes the pipes a shell run as the sandbox user talks through.
// The user's shell reopens /dev/fd/N (and commands /dev/stdout), and a pipe
// made by root is 0600 root, so each read end is handed to the user.
// Until keep, closeAll closes every pipe made. The first error sticks: a
// caller makes all its pipes, then checks err once.
type userPipes struct {
	cred  *syscall.Credential
	files []*os.File
	err   error // the first pipe that failed
}

// pipe makes a pipe named name (for errors), or nothing once one failed.
func (p *userPipes) pipe(name string) (r, w *os.File) {
	if p.err != nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err == nil {
		p.files = append(p.files, r, w)
		if p.cred != nil {
			err = r.Chown(int(p.cred.Uid), int(p.cred.Gid))
		}
	}
	if err != nil {
		p.err = fmt.Errorf("%s pipe: %w", name, err)
		return nil, nil
	}
	return r, w
}

// keep hands the pipes to their users: closeAll no longer closes them.
func (p *userPipes) keep() { p.files = nil }

func (p *userPipes) closeAll() {
	for _, f := range p.files {
		f.Close()
	}
	p.files = nil
}
