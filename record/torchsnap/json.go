package torchsnap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxJSONDepth bounds nesting; snapshots nest five levels deep.
const maxJSONDepth = 256

// decodeJSON reads MemoryViz's JSON form of a snapshot (the same schema as the
// pickle) into the builder's value model, so both inputs share one converter.
func decodeJSON(r io.Reader, b *builder) (value, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	v, err := jsonValue(dec, b, 0)
	if err != nil {
		return value{}, fmt.Errorf("json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return value{}, errors.New("json: data after the top-level value")
	}
	return b.settle(v)
}

func jsonValue(dec *json.Decoder, b *builder, depth int) (value, error) {
	if depth > maxJSONDepth {
		return value{}, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return value{}, err
	}
	switch t := tok.(type) {
	case nil:
		return value{}, nil
	case bool:
		return boolValue(t), nil
	case string:
		return b.internString(t), nil
	case json.Number:
		return jsonNumber(string(t)), nil
	case json.Delim:
		switch t {
		case '{':
			d := b.newDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return value{}, err
				}
				ks, ok := kt.(string)
				if !ok {
					return value{}, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := jsonValue(dec, b, depth+1)
				if err != nil {
					return value{}, err
				}
				if err := b.setItem(d, b.internString(ks), v); err != nil {
					return value{}, err
				}
			}
			if err := closeDelim(dec); err != nil {
				return value{}, err
			}
			return d, nil
		case '[':
			l := b.newList(vList, nil)
			for dec.More() {
				v, err := jsonValue(dec, b, depth+1)
				if err != nil {
					return value{}, err
				}
				if err := b.appendItem(l, v); err != nil {
					return value{}, err
				}
			}
			if err := closeDelim(dec); err != nil {
				return value{}, err
			}
			return l, nil
		}
	}
	return value{}, fmt.Errorf("unexpected token %v", tok)
}

// closeDelim consumes the closing bracket of an object or array.
func closeDelim(dec *json.Decoder) error {
	_, err := dec.Token()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func jsonNumber(s string) value {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intValue(n)
	}
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return value{vUint, int64(n)}
		}
		return value{k: vBig}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return floatValue(f)
}
