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

// policyRef is one policies row.
type policyRef struct {
	id   int64
	body string
}

// policyRefs is the writer's cache of committed policies rows. Only the
// writer goroutine uses it. It is bounded: when full it starts over.
type policyRefs struct {
	ids    map[string]int64
	bodies map[int64]string
}

func (c *policyRefs) add(refs []policyRef) {
	for _, r := range refs {
		if _, ok := c.bodies[r.id]; ok {
			continue
		}
		if c.ids == nil || len(c.ids) >= maxCachedPolicies {
			c.ids, c.bodies = make(map[string]int64), make(map[int64]string)
		}
		c.ids[r.body], c.bodies[r.id] = r.id, r.body
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

// policyID returns the id of the policies row holding body, inserting the
// row if there is none.
func (t *wtx) policyID(body []byte) (int64, error) {
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
	t.learned = append(t.learned, policyRef{id: id, body: doc})
	return id, nil
}

// policyBody returns the canonical bytes of the policies row id.
func (t *wtx) policyBody(id int64) (string, error) {
	if body, ok := t.w.refs.bodies[id]; ok {
		return body, nil
	}
	if r, ok := t.uncommitted("", id); ok {
		return r.body, nil
	}
	var body string
	if err := t.queryRow(`SELECT body FROM policies WHERE id = ?`, id).Scan(&body); err != nil {
		return "", err
	}
	t.learned = append(t.learned, policyRef{id: id, body: body})
	return body, nil
}
