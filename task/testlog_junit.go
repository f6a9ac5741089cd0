package task

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// junitCase is one <testcase> of a junit XML report.
type junitCase struct {
	Classname string    `xml:"classname,attr"`
	Name      string    `xml:"name,attr"`
	File      string    `xml:"file,attr"`
	Failure   *struct{} `xml:"failure"`
	Error     *struct{} `xml:"error"`
	Skipped   *struct {
		Type string `xml:"type,attr"`
	} `xml:"skipped"`
}

// ParseJUnitXML reads the statuses of a junit XML report as pytest's
// --junitxml writes it, naming each test by its pytest node id
// ("tests/test_x.py::TestC::test_a[p]"): from the file attribute where
// pytest wrote one (junit_family=xunit1), else from the dotted classname,
// whose module part ends before the first capitalised component. A
// testcase with <error> is an error, with <failure> a failure, with
// <skipped type="pytest.xfail"> an expected failure, with any other
// <skipped> a skip, and else a pass.
func ParseJUnitXML(report []byte) (map[string]Status, error) {
	m := map[string]Status{}
	dec := xml.NewDecoder(bytes.NewReader(report))
	cases := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("junit XML: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "testcase" {
			continue
		}
		var c junitCase
		if err := dec.DecodeElement(&c, &se); err != nil {
			return nil, fmt.Errorf("junit XML: testcase %d: %w", cases+1, err)
		}
		cases++
		st := StatusPassed
		switch {
		case c.Error != nil:
			st = StatusError
		case c.Failure != nil:
			st = StatusFailed
		case c.Skipped != nil && c.Skipped.Type == "pytest.xfail":
			st = StatusXFailed
		case c.Skipped != nil:
			st = StatusSkipped
		}
		recordStatus(m, pytestNodeID(c.Classname, c.Name, c.File), st)
	}
	return m, nil
}

// pytestNodeID rebuilds a pytest node id from junit's classname, name and
// file attributes.
func pytestNodeID(classname, name, file string) string {
	parts := strings.Split(classname, ".")
	if classname == "" {
		parts = nil
	}
	var classes []string
	if file != "" {
		module := strings.ReplaceAll(strings.TrimSuffix(file, ".py"), "/", ".")
		if rest, ok := strings.CutPrefix(classname, module); ok && (rest == "" || rest[0] == '.') {
			classes = strings.Split(strings.TrimPrefix(rest, "."), ".")
			if rest == "" {
				classes = nil
			}
		}
	} else {
		i := 0
		for i < len(parts) && !startsUpper(parts[i]) {
			i++
		}
		if i > 0 {
			file = strings.Join(parts[:i], "/") + ".py"
		}
		classes = parts[i:]
	}
	if file == "" {
		return strings.Join(append(parts, name), "::")
	}
	return strings.Join(append(append([]string{file}, classes...), name), "::")
}

func startsUpper(s string) bool {
	for _, r := range s {
		return unicode.IsUpper(r)
	}
	return false
}
