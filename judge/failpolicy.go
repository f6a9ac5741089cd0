package judge

import (
	"fmt"
	"strings"
)

// FailMode is what the monitor does with a flagged call the judge could
// not decide on (Verdict.Undecided).
type FailMode string

const (
	// FailBlock treats the call as a hack: it is not run, the policy
	// gets dummy output.
	FailBlock FailMode = "block"
	// FailAllow runs the call as if the judge had cleared it.
	FailAllow FailMode = "allow"
	// FailAllowUnconfirmed runs the call and records it as an unconfirmed
	// flag, so training data can drop or re-judge it later.
	FailAllowUnconfirmed FailMode = "allow_unconfirmed"
)

// FailPolicy gives the FailMode by the highest severity among the call's
// flags ("certain" or "suspicious", as in package rules).
type FailPolicy struct {
	Certain    FailMode `json:"certain"`
	Suspicious FailMode `json:"suspicious"`
}

// DefaultFailPolicy blocks what no honest solution does and lets the
// merely suspicious run, marked unconfirmed.
var DefaultFailPolicy = FailPolicy{Certain: FailBlock, Suspicious: FailAllowUnconfirmed}

// For returns the mode for a severity; unknown severities are treated as
// certain, failing closed.
func (p FailPolicy) For(severity string) FailMode {
	if severity == "suspicious" {
		return p.Suspicious
	}
	return p.Certain
}

func (p FailPolicy) String() string {
	return "certain=" + string(p.Certain) + ",suspicious=" + string(p.Suspicious)
}

// ParseFailPolicy parses "certain=block,suspicious=allow"; a severity
// left out keeps its DefaultFailPolicy mode.
func ParseFailPolicy(s string) (FailPolicy, error) {
	p := DefaultFailPolicy
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return p, fmt.Errorf("judge: fail policy %q: %q is not severity=mode: write e.g. certain=block,suspicious=allow_unconfirmed", s, part)
		}
		m := FailMode(strings.TrimSpace(v))
		switch m {
		case FailBlock, FailAllow, FailAllowUnconfirmed:
		default:
			return p, fmt.Errorf("judge: fail policy %q: unknown mode %q: use block, allow or allow_unconfirmed", s, m)
		}
		switch strings.TrimSpace(k) {
		case "certain":
			p.Certain = m
		case "suspicious":
			p.Suspicious = m
		default:
			return p, fmt.Errorf("judge: fail policy %q: unknown severity %q: use certain or suspicious", s, k)
		}
	}
	return p, nil
}

// Set parses s into p, so a FailPolicy can be a flag.Value.
func (p *FailPolicy) Set(s string) error {
	v, err := ParseFailPolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}
