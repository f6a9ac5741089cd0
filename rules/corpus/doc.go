// Package corpus measures a rules policy on a labelled corpus: case files,
// one per example (cases/<category>/<id>.case: the call, a separator, the
// rule ids it expects), or JSONL lines of hacks (each labelled with the
// rules category it belongs to) and of benign calls, each with its task,
// sandbox facts and the calls before it.
// Every line runs through the normalizer (package normalize) and the
// rules, as an episode's calls do, and the Report gives recall per category and the
// benign flag rate, with the misses and false positives. It is what
// `rollcage rules eval` runs.
//
// It sits beside rules and depends on normalize, rules and toolcall and
// nothing above them: no monitor.
package corpus
