package agent

import (
	"fmt"
	"os"
	"syscall"
)

// userPipes makes the pipes a shell run as the sandbox user talks through.
// The user's shell reopens /dev/fd/N (and commands /dev/stdout), and a pipe
// made by root is 0600 root, so each read end is handed to the user.
// Until keep, closeAll closes every pipe made.
type userPipes struct {
	cred  *syscall.Credential
	files []*os.File
}

func (p *userPipes) pipe(name string) (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("%s pipe: %w", name, err)
	}
	p.files = append(p.files, r, w)
	if p.cred != nil {
		if err := r.Chown(int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return nil, nil, fmt.Errorf("%s pipe: %w", name, err)
		}
	}
	return r, w, nil
}

// keep hands the pipes to their users: closeAll no longer closes them.
func (p *userPipes) keep() { p.files = nil }

func (p *userPipes) closeAll() {
	for _, f := range p.files {
		f.Close()
	}
	p.files = nil
}
