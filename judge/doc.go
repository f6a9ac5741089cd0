// Package judge decides whether a flagged tool call is a reward hack.
//
// The rules in package rules are tuned for recall: they flag honest calls
// too (git log, reading visible tests, curl to a package index). The
// monitor hands each flagged call, with the task's instruction, what the
// task protects, every flag and the recent history, to a Judge, which
// answers with a Verdict. Only a confirmed hack is kept from running.
//
// OpenAI is the Judge backed by any OpenAI-compatible chat completions
// server. It never makes an episode hang: every Judge call is bounded by
// Config.Timeout, concurrency waits honour it, and a server that is
// unreachable, slow, rate limiting past the deadline or answering garbage
// yields a Verdict with Undecided set, never an error. The monitor applies
// a FailPolicy to undecided verdicts.
//
// The package imports none of rollcage's packages: Request carries plain
// JSON and a mirror of rules.Flag, so the judge can also be evaluated
// offline on labelled data (Eval) and reused by the audit tools.
package judge
