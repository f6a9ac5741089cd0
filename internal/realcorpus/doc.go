// Package realcorpus gives tests the real third-party trajectories kept
// beside the repository (shared/corpus/real): data, never committed, that
// tests sample long strings from. Outside CI a test goes on without it; in
// CI, where it is there, its absence fails the test.
package realcorpus
