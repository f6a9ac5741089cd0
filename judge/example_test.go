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
	s := judge.Sampler{Rate: 0.5, Seed: 42}
	// The same call id gets the same answer in every run with this seed.
	fmt.Println(s.Sample("ep-1/req-7") == s.Sample("ep-1/req-7"))
	fmt.Println(judge.Sampler{}.Sample("ep-1/req-7"))
	// Output:
	// true
	// false
}
