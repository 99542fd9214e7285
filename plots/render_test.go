package plots

import (
	"bytes"
	"compress/zlib"
	"io"
	"regexp"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// pdfText returns the inflated content streams of a PDF.
func pdfText(t *testing.T, pdf []byte) []byte {
	t.Helper()
	var out []byte
	for _, m := range regexp.MustCompile(`(?s)stream\r?\n(.*?)endstream`).FindAllSubmatch(pdf, -1) {
		r, err := zlib.NewReader(bytes.NewReader(m[1]))
		if err != nil {
			continue // not a compressed stream (a font's raw bytes)
		}
		b, _ := io.ReadAll(r)
		out = append(out, b...)
	}
	return out
}

// A PDF writes text in its fonts' code page: "…" and "µ" as their cp1252
// bytes, not as UTF-8 read byte by byte ("â€¦", "Âµ").
func TestRender_pdfText(t *testing.T) {
	p := plot.New()
	p.Title.Text = "peak 5 µs … done ▲"
	var buf bytes.Buffer
	wt, err := render(p, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	text := pdfText(t, buf.Bytes())
	if !bytes.Contains(text, []byte("peak 5 \xb5s \x85 done .")) {
		t.Errorf("the title is not in cp1252 in the PDF's content:\n%q", text)
	}
}

// An SVG embeds the fonts its text uses, and keeps runs of spaces.
func TestRender_svgFonts(t *testing.T) {
	p := plot.New()
	p.Title.Text = "peak  at 3 s"
	sans(p)
	var buf bytes.Buffer
	wt, err := render(p, "svg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, "@font-face") || !strings.Contains(s, "Liberation") {
		t.Errorf("the SVG embeds no font")
	}
	if !strings.Contains(buf.String(), ">peak \u00a0at 3 s<") {
		t.Errorf("the SVG's title collapses its spaces")
	}
}

func TestToCP1252(t *testing.T) {
	for in, want := range map[string]string{"abc": "abc", "µ": "\xb5", "…–€": "\x85\x96\x80", "▲→": ".."} {
		if got := toCP1252(in); got != want {
			t.Errorf("toCP1252(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTimeUnit(t *testing.T) {
	for span, want := range map[int64]string{0: "µs", 999: "µs", 1000: "ms", 34_170: "ms", 999_999: "ms", 1_000_000: "s", 5_530_000: "s"} {
		if got := timeUnit(span); got != want {
			t.Errorf("timeUnit(%d µs) = %q, want %q", span, got, want)
		}
	}
}
