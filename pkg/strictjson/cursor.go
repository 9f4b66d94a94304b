package strictjson

// Cursor walks a document that Check accepted, for callers that fill their
// own types from it instead of through Decode's encoding/json pass (which
// rescans the bytes and reflects over every field). Check has established
// the syntax, the shape and every rule; the cursor only finds its way, and
// every method still reports false on a surprise instead of trusting that.
type Cursor struct {
	d []byte
	i int
}

// NewCursor returns a cursor at the start of data.
func NewCursor(data []byte) *Cursor { return &Cursor{d: data} }

func (c *Cursor) space() {
	for c.i < len(c.d) && (c.d[c.i] == ' ' || c.d[c.i] == '\t' || c.d[c.i] == '\n' || c.d[c.i] == '\r') {
		c.i++
	}
}

// Next skips space and consumes b if it comes next.
func (c *Cursor) Next(b byte) bool {
	c.space()
	if c.i < len(c.d) && c.d[c.i] == b {
		c.i++
		return true
	}
	return false
}

// End reports whether only space is left.
func (c *Cursor) End() bool {
	c.space()
	return c.i == len(c.d)
}

// Object reads an object, calling member with each key (unescaped) to
// read its value.
func (c *Cursor) Object(member func(key []byte) bool) bool {
	if !c.Next('{') {
		return false
	}
	if c.Next('}') {
		return true
	}
	for {
		k, ok := c.Bytes()
		if !ok || !c.Next(':') || !member(k) {
			return false
		}
		if c.Next('}') {
			return true
		}
		if !c.Next(',') {
			return false
		}
	}
}

// Array reads an array, calling elem to read each element.
func (c *Cursor) Array(elem func() bool) bool {
	if !c.Next('[') {
		return false
	}
	if c.Next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if c.Next(']') {
			return true
		}
		if !c.Next(',') {
			return false
		}
	}
}

// Text reads a string and returns its unescaped value.
func (c *Cursor) Text() (string, bool) {
	b, ok := c.Bytes()
	return string(b), ok
}

// Bytes reads a string and returns its unescaped content, which may alias
// the document.
func (c *Cursor) Bytes() ([]byte, bool) {
	q, ok := c.Quoted()
	if !ok {
		return nil, false
	}
	content := q[1 : len(q)-1]
	for _, b := range content {
		if b == '\\' {
			return Unescape(content)
		}
	}
	return content, true
}

// Quoted reads a string and returns it as written, quotation marks and
// escapes included.
func (c *Cursor) Quoted() ([]byte, bool) {
	c.space()
	if c.i >= len(c.d) || c.d[c.i] != '"' {
		return nil, false
	}
	for i := c.i + 1; i < len(c.d); i++ {
		switch c.d[i] {
		case '\\':
			i++
		case '"':
			start := c.i
			c.i = i + 1
			return c.d[start:c.i], true
		}
	}
	return nil, false
}

// Number returns the text of a number.
func (c *Cursor) Number() []byte {
	c.space()
	start := c.i
	for c.i < len(c.d) {
		switch b := c.d[c.i]; {
		case b >= '0' && b <= '9', b == '-', b == '+', b == '.', b == 'e', b == 'E':
			c.i++
			continue
		}
		break
	}
	return c.d[start:c.i]
}

// Value returns the bytes of the next value, which must be an object, an
// array or a string.
func (c *Cursor) Value() ([]byte, bool) {
	c.space()
	start, depth := c.i, 0
	for c.i < len(c.d) {
		switch c.d[c.i] {
		case '"':
			if _, ok := c.Quoted(); !ok {
				return nil, false
			}
			if depth == 0 {
				return c.d[start:c.i], true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				c.i++
				return c.d[start:c.i], true
			}
			if depth < 0 {
				return nil, false
			}
		default:
			if depth == 0 {
				return nil, false // a scalar
			}
		}
		c.i++
	}
	return nil, false
}
