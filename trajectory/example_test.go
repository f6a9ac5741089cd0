package trajectory_test

import (
	"context"
	"fmt"
	"os"

	"github.com/rollcage/rollcage/trajectory"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "trajectories")
	defer os.RemoveAll(dir)

	store, err := trajectory.OpenStore(ctx, trajectory.Config{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	log, _ := store.Log("ep-1")
	start, _ := trajectory.NewEvent("ep-1", 0, 0, trajectory.TypeEpisodeStart, trajectory.EpisodeStart{TaskID: "demo"})
	log.Append(start)
	end, _ := trajectory.NewEvent("ep-1", 0, 0, trajectory.TypeEpisodeEnd, trajectory.EpisodeEnd{Resolved: true, Reward: 1})
	log.Append(end)

	store.Read(ctx, "ep-1", 0, func(ev trajectory.Event) error {
		fmt.Println(ev.Offset, ev.Type)
		return nil
	})
	store.ReadFinished(ctx, 0, func(ev trajectory.Event) error {
		fmt.Println("finished:", ev.Offset, ev.EpisodeID, ev.Type)
		return nil
	})
	// Output:
	// 0 episode_start
	// 1 episode_end
	// finished: 0 ep-1 segment_end
	// finished: 1 ep-1 episode_end
}
