package judge_test

import (
	"fmt"

	"github.com/rollcage/rollcage/judge"
)

func ExampleParseFailPolicy() {
	p, err := judge.ParseFailPolicy("suspicious=allow")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.For("certain"), p.For("suspicious"))
	// Output: block allow
}

func ExampleSampler() {
	// The answer is a function of the seed and the call id alone: this
	// output is the same in every run, and another seed picks other calls.
	for _, seed := range []uint64{42, 7} {
		s := judge.Sampler{Rate: 0.5, Seed: seed}
		var picked []bool
		for i := 1; i <= 8; i++ {
			picked = append(picked, s.Sample(fmt.Sprintf("ep-1/req-%d", i)))
		}
		fmt.Println(picked)
	}
	// The zero value audits nothing.
	fmt.Println(judge.Sampler{}.Sample("ep-1/req-7"))
	// Output:
	// [true true true false false true true false]
	// [true false false true false true true false]
	// false
}
