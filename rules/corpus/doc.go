// Package corpus measures a rules policy on a labelled corpus: JSONL lines
// of hacks (each labelled with the rules category it belongs to) and of
// benign calls, each with its task, sandbox facts and the calls before it.
// Every line runs through the monitor's normalizer and the rules, as an
// episode's calls do, and the Report gives recall per category and the
// benign flag rate, with the misses and false positives. It is what
// `rollcage rules eval` runs.
//
// It sits beside rules and needs of the monitor only its normalizer, a
// one-method interface (Normalizer) that *monitor.Files satisfies, so it
// depends on rules and toolcall and nothing above them.
package corpus
