package github_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A small, strict reader of GitHub's OpenAPI 3.0 description, for the
// contract test (contract_test.go): operations by method and path
// template, their parameters, request bodies, responses and examples,
// and a JSON Schema validator for the subset the description uses.

// The pinned package (testdata/octokit-openapi, installed by npm ci).
const (
	openapiDir  = "../../testdata/octokit-openapi"
	openapiFile = openapiDir + "/node_modules/@octokit/openapi/generated/api.github.com.json"
)

type openapi struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components map[string]map[string]json.RawMessage `json:"components"`
	templates  []template
	cache      map[string]any
}

type template struct {
	path string
	segs []string
}

// loadOpenAPI reads the pinned description; absent, the test fails when
// CI is set (.ci/run installs it) and skips otherwise. The installed
// package must be the version the lockfile pins.
func loadOpenAPI(t *testing.T) *openapi {
	t.Helper()
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	b, err := os.ReadFile(openapiDir + "/package-lock.json")
	if err != nil || json.Unmarshal(b, &lock) != nil {
		t.Fatalf("the lockfile: %v", err)
	}
	want := lock.Packages["node_modules/@octokit/openapi"].Version
	var installed struct {
		Version string `json:"version"`
	}
	b, err = os.ReadFile(openapiDir + "/node_modules/@octokit/openapi/package.json")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@octokit/openapi is not installed (.ci/run runs npm ci in %s): %v", openapiDir, err)
		}
		t.Skipf("@octokit/openapi is not installed: (cd %s && npm ci)", openapiDir)
	}
	if json.Unmarshal(b, &installed) != nil || installed.Version != want || want == "" {
		t.Fatalf("installed @octokit/openapi %q, the lockfile pins %q: run npm ci", installed.Version, want)
	}
	b, err = os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	var o openapi
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("the description: %v", err)
	}
	if len(o.Paths) < 500 {
		t.Fatalf("the description has %d paths", len(o.Paths))
	}
	o.cache = map[string]any{}
	for p := range o.Paths {
		o.templates = append(o.templates, template{path: p, segs: strings.Split(strings.Trim(p, "/"), "/")})
	}
	sort.Slice(o.templates, func(i, j int) bool { return o.templates[i].path < o.templates[j].path })
	return &o
}

// component returns #/components/<kind>/<name>, decoded once.
func (o *openapi) component(ref string) (any, error) {
	if v, ok := o.cache[ref]; ok {
		return v, nil
	}
	parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
	if !strings.HasPrefix(ref, "#/components/") || len(parts) != 2 {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	raw, ok := o.Components[parts[0]][parts[1]]
	if !ok {
		return nil, fmt.Errorf("dangling $ref %q", ref)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	o.cache[ref] = v
	return v, nil
}

// deref follows $ref chains to a plain object.
func (o *openapi) deref(v any) (map[string]any, error) {
	for i := 0; i < 16; i++ {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("not an object: %T", v)
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, nil
		}
		var err error
		if v, err = o.component(ref); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("$ref chain too long")
}

// operation is one method on one path template.
type operation struct {
	method, path string
	id           string
	op           map[string]any
	params       map[string]map[string]any // "query:name", "path:name" -> parameter
}

// find returns the operation for method and an escaped request path:
// the template whose literal segments match most, each {param} one
// segment (an x-multi-segment one the rest), its path parameters valid.
func (o *openapi) find(method, escapedPath string) (*operation, map[string]string, error) {
	segs := strings.Split(strings.Trim(escapedPath, "/"), "/")
	var best *operation
	var bestArgs map[string]string
	bestLit := -1
	for _, tp := range o.templates {
		raw, ok := o.Paths[tp.path][strings.ToLower(method)]
		if !ok || len(tp.segs) > len(segs) {
			continue
		}
		op, err := o.operation(method, tp.path, raw)
		if err != nil {
			return nil, nil, err
		}
		args, lit, ok := matchTemplate(op, tp.segs, segs)
		if ok && lit > bestLit {
			best, bestArgs, bestLit = op, args, lit
		}
	}
	if best == nil {
		return nil, nil, fmt.Errorf("no operation %s %s in GitHub's description", method, escapedPath)
	}
	for name, v := range bestArgs {
		if err := o.checkParam(best.params["path:"+name], v); err != nil {
			return nil, nil, fmt.Errorf("%s %s: path parameter %s: %v", method, best.path, name, err)
		}
	}
	return best, bestArgs, nil
}

func matchTemplate(op *operation, tsegs, segs []string) (map[string]string, int, bool) {
	args := map[string]string{}
	lit := 0
	for i, ts := range tsegs {
		if i >= len(segs) {
			return nil, 0, false
		}
		if !strings.HasPrefix(ts, "{") {
			if ts != segs[i] {
				return nil, 0, false
			}
			lit++
			continue
		}
		name := strings.Trim(ts, "{}")
		v := segs[i]
		if p := op.params["path:"+name]; p != nil && p["x-multi-segment"] == true && i == len(tsegs)-1 {
			v = strings.Join(segs[i:], "/")
			segs = segs[:i+1]
		}
		u, err := url.PathUnescape(v)
		if err != nil || u == "" {
			return nil, 0, false
		}
		args[name] = u
	}
	return args, lit, len(tsegs) == len(segs)
}

func (o *openapi) operation(method, path string, raw json.RawMessage) (*operation, error) {
	key := "op " + method + " " + path
	if v, ok := o.cache[key]; ok {
		return v.(*operation), nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	op := &operation{method: method, path: path, op: m, params: map[string]map[string]any{}}
	op.id, _ = m["operationId"].(string)
	var all []any
	if shared, ok := o.Paths[path]["parameters"]; ok {
		var list []any
		if err := json.Unmarshal(shared, &list); err != nil {
			return nil, err
		}
		all = append(all, list...)
	}
	if list, ok := m["parameters"].([]any); ok {
		all = append(all, list...)
	}
	for _, p := range all {
		pm, err := o.deref(p)
		if err != nil {
			return nil, err
		}
		in, _ := pm["in"].(string)
		name, _ := pm["name"].(string)
		op.params[in+":"+name] = pm
	}
	o.cache[key] = op
	return op, nil
}

// checkParam validates a parameter's text against its schema: integers,
// booleans, enums, bounds, date-times.
func (o *openapi) checkParam(p map[string]any, v string) error {
	if p == nil {
		return fmt.Errorf("not declared")
	}
	s, err := o.deref(p["schema"])
	if err != nil {
		return err
	}
	var j any = v
	switch s["type"] {
	case "integer":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		j = float64(n)
	case "number":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		j = f
	case "boolean":
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not a boolean", v)
		}
		j = v == "true"
	case "string", nil:
	default:
		return fmt.Errorf("parameter type %v is not supported here", s["type"])
	}
	if errs := o.validate(s, j, "", false); len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// checkQuery: every query parameter is declared and valid, every
// required one present.
func (o *openapi) checkQuery(op *operation, q url.Values) []string {
	var errs []string
	for name, vs := range q {
		p := op.params["query:"+name]
		if p == nil {
			errs = append(errs, fmt.Sprintf("query parameter %q is not one of the operation's", name))
			continue
		}
		if len(vs) != 1 {
			errs = append(errs, fmt.Sprintf("query parameter %q given %d times", name, len(vs)))
		}
		for _, v := range vs {
			if err := o.checkParam(p, v); err != nil {
				errs = append(errs, fmt.Sprintf("query parameter %s=%q: %v", name, v, err))
			}
		}
	}
	for key, p := range op.params {
		if name, ok := strings.CutPrefix(key, "query:"); ok && p["required"] == true && !q.Has(name) {
			errs = append(errs, fmt.Sprintf("required query parameter %q missing", name))
		}
	}
	sort.Strings(errs)
	return errs
}

// checkBody validates a request body against the operation's
// application/json request schema, strictly: a property the schema does
// not name is an error even where the description leaves objects open.
func (o *openapi) checkBody(op *operation, body []byte, contentType string) []string {
	rb, hasBody := op.op["requestBody"]
	if !hasBody {
		if len(body) > 0 {
			return []string{"a body sent to an operation that takes none"}
		}
		return nil
	}
	r, err := o.deref(rb)
	if err != nil {
		return []string{err.Error()}
	}
	if len(body) == 0 {
		if r["required"] == true {
			return []string{"the operation requires a body"}
		}
		return nil
	}
	if !strings.HasPrefix(contentType, "application/json") {
		return []string{fmt.Sprintf("body sent as %q", contentType)}
	}
	content, _ := r["content"].(map[string]any)
	media, ok := content["application/json"].(map[string]any)
	if !ok {
		return []string{"the operation takes no application/json body"}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []string{"the body is not JSON"}
	}
	return o.validate(media["schema"], v, "body", true)
}

// response is the documented answer for status (nil when undocumented).
func (o *openapi) response(op *operation, status int) (map[string]any, error) {
	rs, _ := op.op["responses"].(map[string]any)
	r, ok := rs[strconv.Itoa(status)]
	if !ok {
		return nil, nil
	}
	return o.deref(r)
}

// responseSchema and examples of a documented answer's application/json.
func (o *openapi) responseMedia(r map[string]any) (map[string]any, bool) {
	content, _ := r["content"].(map[string]any)
	m, ok := content["application/json"].(map[string]any)
	return m, ok
}

// examples of a media object: name -> value.
func (o *openapi) examples(media map[string]any) (map[string]any, error) {
	out := map[string]any{}
	if v, ok := media["example"]; ok {
		out["example"] = v
	}
	exs, _ := media["examples"].(map[string]any)
	for name, e := range exs {
		m, err := o.deref(e)
		if err != nil {
			return nil, err
		}
		v, ok := m["value"]
		if !ok {
			return nil, fmt.Errorf("example %s has no value", name)
		}
		out[name] = v
	}
	return out, nil
}

// validate checks v against schema and returns what does not hold, each
// with its JSON path. strict refuses properties a schema does not name
// (the request side); otherwise only additionalProperties: false does.
func (o *openapi) validate(schema any, v any, at string, strict bool) []string {
	return o.validateDepth(schema, v, at, strict, 0)
}

func (o *openapi) validateDepth(schema any, v any, at string, strict bool, depth int) []string {
	if depth > 64 {
		return []string{at + ": schema nests too deep"}
	}
	s, err := o.deref(schema)
	if err != nil {
		return []string{at + ": " + err.Error()}
	}
	if len(s) == 0 {
		return nil // {}: anything
	}
	bad := func(f string, args ...any) []string { return []string{at + ": " + fmt.Sprintf(f, args...)} }
	if v == nil {
		if s["nullable"] == true {
			return nil
		}
		if _, ok := s["type"]; ok {
			return bad("null where the schema is not nullable")
		}
	}
	var errs []string
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			errs = append(errs, o.validateDepth(sub, v, at, false, depth+1)...)
		}
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		matched := false
		var first []string
		for i, sub := range anyOf {
			e := o.validateDepth(sub, v, at, strict, depth+1)
			if len(e) == 0 {
				matched = true
				break
			}
			if i == 0 {
				first = e
			}
		}
		if !matched {
			errs = append(errs, bad("matches none of anyOf (first: %s)", strings.Join(first, "; "))...)
		}
	}
	if oneOf, ok := s["oneOf"].([]any); ok {
		n := 0
		var first []string
		for i, sub := range oneOf {
			e := o.validateDepth(sub, v, at, strict, depth+1)
			if len(e) == 0 {
				n++
			} else if i == 0 {
				first = e
			}
		}
		if n != 1 {
			errs = append(errs, bad("matches %d of oneOf's %d schemas, not exactly one (first: %s)", n, len(oneOf), strings.Join(first, "; "))...)
		}
	}
	if v == nil {
		return errs
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if jsonEqual(e, v) {
				found = true
			}
		}
		if !found {
			errs = append(errs, bad("%v is not one of %v", v, enum)...)
		}
	}
	typ, _ := s["type"].(string)
	switch x := v.(type) {
	case map[string]any:
		if typ != "" && typ != "object" {
			return append(errs, bad("an object where the schema says %s", typ)...)
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := x[r]; !ok {
				errs = append(errs, bad("required property %q missing", r)...)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k]; ok {
				errs = append(errs, o.validateDepth(ps, x[k], at+"."+k, strict, depth+1)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, bad("property %q is not allowed (additionalProperties: false)", k)...)
				}
			case map[string]any:
				errs = append(errs, o.validateDepth(ap, x[k], at+"."+k, strict, depth+1)...)
			case nil:
				if strict && len(props) > 0 {
					errs = append(errs, bad("property %q is not in the schema", k)...)
				}
			}
		}
	case []any:
		if typ != "" && typ != "array" {
			return append(errs, bad("an array where the schema says %s", typ)...)
		}
		if n, ok := s["minItems"].(float64); ok && float64(len(x)) < n {
			errs = append(errs, bad("%d items, fewer than %v", len(x), n)...)
		}
		if n, ok := s["maxItems"].(float64); ok && float64(len(x)) > n {
			errs = append(errs, bad("%d items, more than %v", len(x), n)...)
		}
		if items, ok := s["items"]; ok {
			for i, e := range x {
				errs = append(errs, o.validateDepth(items, e, at+"["+strconv.Itoa(i)+"]", strict, depth+1)...)
			}
		}
	case string:
		if typ != "" && typ != "string" {
			return append(errs, bad("a string where the schema says %s", typ)...)
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(x))) < n {
			errs = append(errs, bad("shorter than %v", n)...)
		}
		if n, ok := s["maxLength"].(float64); ok && float64(len([]rune(x))) > n {
			errs = append(errs, bad("longer than %v", n)...)
		}
		if p, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err != nil {
				errs = append(errs, bad("pattern %q is not supported here", p)...)
			} else if !re.MatchString(x) {
				errs = append(errs, bad("%q does not match %q", x, p)...)
			}
		}
		switch s["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339, x); err != nil {
				errs = append(errs, bad("%q is not a date-time", x)...)
			}
		case "uri":
			if u, err := url.Parse(x); err != nil || u.Scheme == "" {
				errs = append(errs, bad("%q is not a URI", x)...)
			}
		}
	case float64:
		switch typ {
		case "integer":
			if x != math.Trunc(x) {
				return append(errs, bad("%v is not an integer", x)...)
			}
		case "number", "":
		default:
			return append(errs, bad("a number where the schema says %s", typ)...)
		}
		if n, ok := s["minimum"].(float64); ok && x < n {
			errs = append(errs, bad("%v below the minimum %v", x, n)...)
		}
		if n, ok := s["maximum"].(float64); ok && x > n {
			errs = append(errs, bad("%v above the maximum %v", x, n)...)
		}
	case bool:
		if typ != "" && typ != "boolean" {
			return append(errs, bad("a boolean where the schema says %s", typ)...)
		}
	}
	return errs
}

func asStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestValidatorRefuses: the validator itself catches what it must (a
// validator that accepted everything would pass every contract).
func TestValidatorRefuses(t *testing.T) {
	o := &openapi{cache: map[string]any{}, Components: map[string]map[string]json.RawMessage{"schemas": {
		"thing": json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},
			"state":{"type":"string","enum":["open","closed"]},"at":{"type":"string","format":"date-time"},
			"note":{"type":"string","nullable":true},"tags":{"type":"array","minItems":1,"items":{"type":"string"}}},
			"additionalProperties":false}`),
		"either": json.RawMessage(`{"oneOf":[{"type":"string"},{"type":"integer"}]}`),
	}}}
	ref := map[string]any{"$ref": "#/components/schemas/thing"}
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if errs := o.validate(ref, decode(`{"id":1,"state":"open","at":"2024-01-02T03:04:05Z","note":null,"tags":["a"]}`), "", false); len(errs) != 0 {
		t.Fatalf("a valid value refused: %v", errs)
	}
	for _, bad := range []string{`{"state":"open"}`, `{"id":1.5}`, `{"id":"1"}`, `{"id":1,"state":"merged"}`,
		`{"id":1,"at":"yesterday"}`, `{"id":1,"tags":[]}`, `{"id":1,"tags":[1]}`, `{"id":1,"extra":true}`, `{"id":null}`, `[]`} {
		if errs := o.validate(ref, decode(bad), "", false); len(errs) == 0 {
			t.Errorf("%s accepted", bad)
		}
	}
	open := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}
	if len(o.validate(open, decode(`{"a":"x","b":1}`), "", false)) != 0 || len(o.validate(open, decode(`{"a":"x","b":1}`), "", true)) == 0 {
		t.Error("strict (request side) must refuse an unnamed property, the response side take it")
	}
	either := map[string]any{"$ref": "#/components/schemas/either"}
	if len(o.validate(either, decode(`"x"`), "", false)) != 0 || len(o.validate(either, decode(`true`), "", false)) == 0 {
		t.Error("oneOf")
	}
}
