package store

// The writer interns canonical policies: each distinct document is one
// row of policies, and jobs and attempts hold its id. The writer goroutine
// keeps the ids it knows in both directions so that a submit or a lease
// costs no policy statement. Only committed rows enter that cache: an
// operation collects what it looked up or inserted (wtx.learned), the
// writer keeps that when the operation succeeds (writer.pendingRefs) and
// adds it to the cache only after COMMIT succeeds, so a rolled-back insert
// never leaves an id behind that a later transaction could reuse for other
// bytes.

// policyRef is one policies row and the facts its body decodes to (the
// plugin id, lease TTL, retry base and max attempts every job and attempt
// referencing it also carries in its own columns).
type policyRef struct {
	id    int64
	body  string
	facts policyFacts
}

// policyRefs is the writer's cache of committed policies rows. Only the
// writer goroutine uses it. It is bounded: when full it starts over.
type policyRefs struct {
	ids  map[string]int64
	rows map[int64]policyRef
}

func (c *policyRefs) add(refs []policyRef) {
	for _, r := range refs {
		if _, ok := c.rows[r.id]; ok {
			continue
		}
		if c.ids == nil || len(c.ids) >= maxCachedPolicies {
			c.ids, c.rows = make(map[string]int64), make(map[int64]policyRef)
		}
		c.ids[r.body], c.rows[r.id] = r.id, r
	}
}

// uncommitted finds a row this transaction has looked up or inserted so
// far, by body or (body == "") by id.
func (t *wtx) uncommitted(body string, id int64) (policyRef, bool) {
	for _, refs := range [2][]policyRef{t.w.pendingRefs, t.learned} {
		for _, r := range refs {
			if body != "" && r.body == body || body == "" && r.id == id {
				return r, true
			}
		}
	}
	return policyRef{}, false
}

// policyID returns the id of the policies row holding body, which decodes
// to facts, inserting the row if there is none.
func (t *wtx) policyID(body []byte, facts policyFacts) (int64, error) {
	if id, ok := t.w.refs.ids[string(body)]; ok {
		return id, nil
	}
	doc := string(body)
	if r, ok := t.uncommitted(doc, 0); ok {
		return r.id, nil
	}
	var id int64
	err := t.queryRow(`SELECT id FROM policies WHERE body = ?`, doc).Scan(&id)
	if isNoRows(err) {
		res, ierr := t.exec(`INSERT INTO policies (body) VALUES (?)`, doc)
		if ierr != nil {
			return 0, ierr
		}
		id, err = res.LastInsertId()
	}
	if err != nil {
		return 0, err
	}
	t.learned = append(t.learned, policyRef{id: id, body: doc, facts: facts})
	return id, nil
}

// policyOf returns the policies row id.
func (t *wtx) policyOf(id int64) (policyRef, error) {
	if r, ok := t.w.refs.rows[id]; ok {
		return r, nil
	}
	if r, ok := t.uncommitted("", id); ok {
		return r, nil
	}
	var body string
	if err := t.queryRow(`SELECT body FROM policies WHERE id = ?`, id).Scan(&body); err != nil {
		return policyRef{}, err
	}
	facts, err := decodePolicy([]byte(body))
	if err != nil {
		return policyRef{}, err
	}
	r := policyRef{id: id, body: body, facts: facts}
	t.learned = append(t.learned, r)
	return r, nil
}
