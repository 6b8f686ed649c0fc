package deploytest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func expand(t *testing.T, src string, params map[string]string) (map[string]any, error) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	err := applyLanguageExtensions(doc, params)
	return doc, err
}

func TestForEachFollowsTheDocumentedRules(t *testing.T) {
	src := `{
	  "Transform": ["AWS::LanguageExtensions", "AWS::Serverless-2016-10-31"],
	  "Parameters": {"Names": {"Type": "CommaDelimitedList", "Default": "a-b, c"}},
	  "Mappings": {"M": {"a-b": {"V": "one"}, "c": {"V": "two"}}},
	  "Resources": {
	    "Fixed": {"Type": "T"},
	    "Fn::ForEach::Outer": ["N", {"Ref": "Names"}, {
	      "R${N}": {"Type": "T", "Properties": {
	        "Name": "${N}", "Ref": {"Ref": "N"}, "Sub": {"Fn::Sub": "${R${N}}-${AWS::Region}"},
	        "Found": {"Fn::FindInMap": ["M", {"Ref": "N"}, "V"]},
	        "Fn::ForEach::Tags": ["X", ["x", "y"], {"Tag${X}": "${N}/${X}"}]
	      }},
	      "Fn::ForEach::Inner": ["I", ["1", "${N}"], {"R${N}x${I}": {"Type": "U"}}]
	    }]
	  },
	  "Outputs": {"Fn::ForEach::Out": ["N", ["z"], {"O${N}": {"Value": {"Ref": "Fixed"}}}]}
	}`
	doc, err := expand(t, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"Fixed": map[string]any{"Type": "T"},
		"Ra-b": map[string]any{"Type": "T", "Properties": map[string]any{
			"Name": "a-b", "Ref": "a-b", "Sub": map[string]any{"Fn::Sub": "${Ra-b}-${AWS::Region}"},
			"Found": "one", "Tagx": "a-b/x", "Tagy": "a-b/y",
		}},
		"Rc": map[string]any{"Type": "T", "Properties": map[string]any{
			"Name": "c", "Ref": "c", "Sub": map[string]any{"Fn::Sub": "${Rc}-${AWS::Region}"},
			"Found": "two", "Tagx": "c/x", "Tagy": "c/y",
		}},
		"Ra-bx1": map[string]any{"Type": "U"}, "Ra-bxa-b": map[string]any{"Type": "U"},
		"Rcx1": map[string]any{"Type": "U"}, "Rcxc": map[string]any{"Type": "U"},
	}
	if !reflect.DeepEqual(doc["Resources"], want) {
		got, _ := json.MarshalIndent(doc["Resources"], "", " ")
		t.Errorf("resources:\n%s", got)
	}
	if _, ok := doc["Outputs"].(map[string]any)["Oz"]; !ok {
		t.Errorf("outputs %v, want Oz", doc["Outputs"])
	}

	// A given value replaces the parameter's default.
	doc, err = expand(t, src, map[string]string{"Names": "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["Resources"].(map[string]any)["Ra-b"]; ok {
		t.Error("Names=c still makes Ra-b")
	}
}

func TestForEachRefusesWhatCloudFormationRefuses(t *testing.T) {
	base := `{
	  "Transform": "AWS::LanguageExtensions",
	  "Parameters": {"Names": {"Type": "CommaDelimitedList", "Default": "a,b"}, "One": {"Type": "String", "Default": "a"}},
	  "Mappings": {"M": {"a": {"V": "x"}}},
	  "Resources": {"Fn::ForEach::L": ["N", {"Ref": "Names"}, {"R${N}": {"Type": "T"}}]}
	}`
	for name, edit := range map[string][2]string{
		"a string parameter":  {`{"Ref": "Names"}`, `{"Ref": "One"}`},
		"no such parameter":   {`{"Ref": "Names"}`, `{"Ref": "Nothing"}`},
		"a repeated value":    {`"Default": "a,b"`, `"Default": "a,a"`},
		"a key written twice": {`"Resources": {`, `"Resources": {"Ra": {"Type": "T"}, `},
		"a malformed loop":    {`["N", {"Ref": "Names"}, {"R${N}": {"Type": "T"}}]`, `["N", {"Ref": "Names"}]`},
		"a missing map key":   {`{"Type": "T"}`, `{"Type": "T", "P": {"Fn::FindInMap": ["M", "${N}", "V"]}}`},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(base, edit[0], edit[1], 1)
			if src == base {
				t.Fatalf("edit %q did not apply", edit[0])
			}
			if _, err := expand(t, src, nil); !errors.Is(err, errTemplate) {
				t.Fatalf("ApplyLanguageExtensions: %v, want ErrTemplate", err)
			}
		})
	}
	if _, err := expand(t, base, nil); err != nil {
		t.Fatalf("the unedited template: %v", err)
	}
}
