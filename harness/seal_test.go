package harness

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/rollcage/rollcage/monitor"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/fake"
	"github.com/rollcage/rollcage/trajectory"
)

// fakeSealer is a fake.Backend that seals: the sealed image is
// "<image>-sealed" and the facts are a fixed probe output.
type fakeSealer struct {
	fake.Backend
	facts string
	mu    sync.Mutex
	specs []sandbox.SealSpec
}

func (b *fakeSealer) Seal(ctx context.Context, spec sandbox.SealSpec) (sandbox.Sealed, error) {
	b.mu.Lock()
	b.specs = append(b.specs, spec)
	b.mu.Unlock()
	return sandbox.Sealed{Image: spec.Image + "-sealed", Facts: b.facts}, nil
}

const fakeFacts = "base 1111111111111111111111111111111111111111\n" +
	"commit 2222222222222222222222222222222222222222\n" +
	"ref refs/remotes/origin/main\n" +
	"fix +    return width >= len(line)\n" +
	"msg Allow lines of exactly width\n" +
	"blob 3333333333333333333333333333333333333333\n" +
	"--- base text ---\n" +
	"def wrap(): pass\n"

func TestSealedEpisodeUsesFactsTakenBeforeSealing(t *testing.T) {
	b := &fakeSealer{facts: fakeFacts}
	r, st := testRunner(t, b, Limits{})
	r.cfg.Seal = true
	ep, err := r.Start(context.Background(), fakeTask, fakeHidden, EpisodeMeta{})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close(context.Background())
	if len(b.specs) != 1 || b.specs[0].Image != fakeTask.Image || b.specs[0].Probe != monitor.ProbeScript {
		t.Fatalf("seal specs %+v: want one of %s with the monitor's probe", b.specs, fakeTask.Image)
	}
	sb := b.Created()[0]
	if sb.Spec().Image != fakeTask.Image+"-sealed" || ep.image != sb.Spec().Image {
		t.Errorf("sandbox image %q, grading image %q: want the sealed image", sb.Spec().Image, ep.image)
	}
	var start trajectory.EpisodeStart
	if err := json.Unmarshal(events(t, st, ep.ID())[0].Data, &start); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"sealed_image":"` + fakeTask.Image + `-sealed"`} {
		if !strings.Contains(string(start.Config), want) {
			t.Errorf("episode_start config %s lacks %s", start.Config, want)
		}
	}
	for _, want := range []string{"2222222222222222222222222222222222222222", "origin/main"} {
		if !strings.Contains(string(start.Context), want) {
			t.Errorf("episode_start context lacks the sealed-away fact %s: %s", want, start.Context)
		}
	}
}

func TestSealOffOrImpossible(t *testing.T) {
	noSeal := false
	optOut := fakeTask
	optOut.Seal = &noSeal
	cases := []struct {
		name    string
		backend sandbox.Backend
		seal    bool
		task    bool // use optOut
		wantErr string
		sealed  bool
	}{
		{"runner off", &fakeSealer{facts: fakeFacts}, false, false, "", false},
		{"task opts out", &fakeSealer{facts: fakeFacts}, true, true, "", false},
		{"backend cannot seal", &fake.Backend{}, true, false, "cannot seal images: run with --no-seal", false},
		{"sealed", &fakeSealer{facts: fakeFacts}, true, false, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := testRunner(t, c.backend, Limits{})
			r.cfg.Seal = c.seal
			tk := fakeTask
			if c.task {
				tk = optOut
			}
			ep, err := r.Start(context.Background(), tk, fakeHidden, EpisodeMeta{})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close(context.Background())
			if got := strings.HasSuffix(ep.image, "-sealed"); got != c.sealed {
				t.Errorf("image %s: sealed %v, want %v", ep.image, got, c.sealed)
			}
		})
	}
}
