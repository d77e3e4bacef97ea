package report

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"time"

	"github.com/sidecache/sidecache/bench/internal/load"
)

var (
	white   = color.RGBA{255, 255, 255, 255}
	ink     = color.RGBA{30, 30, 30, 255}
	grid    = color.RGBA{225, 225, 225, 255}
	palette = []color.RGBA{
		{89, 89, 89, 255},   // direct: grey
		{78, 121, 167, 255}, // pass: blue
		{242, 142, 43, 255}, // cache: orange
		{89, 161, 79, 255},  // batch: green
		{225, 87, 89, 255},  // cache+batch: red
		{176, 122, 161, 255},
		{118, 183, 178, 255},
	}
)

// panel is one bar chart: groups along x, one bar per series in a group.
type panel struct {
	title  string
	groups []string    // two lines allowed, split by "\n"
	series []string    // legend; empty for a single unnamed series
	values [][]float64 // [group][series]; NaN = not measured
	format func(float64) string
}

const (
	chartW    = 1200
	panelH    = 330
	marginL   = 70
	marginR   = 20
	titleH    = 40
	labelH    = 34
	legendRow = 22
)

// drawChart renders TPS and p99 per configuration, and the peers, as PNG.
func drawChart(out io.Writer, r *Report) error {
	var panels []panel
	if len(r.Rows) > 0 {
		var groups []string
		var workloads []load.Workload
		for _, wl := range r.Params.Rows {
			label := wl.Method + " " + wl.Endpoint
			if wl.Name == "mixed" {
				label = "mixed"
			}
			groups = append(groups, label)
			workloads = append(workloads, wl)
		}
		tps := make([][]float64, len(groups))
		p99 := make([][]float64, len(groups))
		for i, wl := range workloads {
			for _, c := range r.Params.Configs {
				t, q := math.NaN(), math.NaN()
				if row, ok := r.row(c, wl.Name); ok {
					t, q = row.Out.TPS(), float64(row.Out.Latencies.P99)/float64(time.Millisecond)
				}
				tps[i] = append(tps[i], t)
				p99[i] = append(p99[i], q)
			}
		}
		panels = append(panels,
			panel{title: "TPS by endpoint and configuration (higher is better)", groups: groups, series: r.Params.Configs, values: tps, format: shortNum},
			panel{title: "p99 latency in ms (lower is better)", groups: groups, series: r.Params.Configs, values: p99, format: shortMS},
		)
	}
	var pg []string
	var pv [][]float64
	for _, p := range r.Peers {
		test := "pass-through"
		if p.Test == "hit" {
			test = "cache hit"
		}
		pg = append(pg, p.Server+"\n"+test)
		v := math.NaN()
		if p.Out != nil {
			v = p.Out.TPS()
		}
		pv = append(pv, []float64{v})
	}
	if len(pg) > 0 {
		panels = append(panels, panel{title: "Peers: TPS of GET /clients/{id} (n/m = not measured)", groups: pg, values: pv, format: shortNum})
	}
	if len(panels) == 0 {
		panels = append(panels, panel{title: "nothing measured"})
	}

	img := image.NewRGBA(image.Rect(0, 0, chartW, panelH*len(panels)))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	for i, p := range panels {
		p.draw(img, image.Rect(0, i*panelH, chartW, (i+1)*panelH))
	}
	return png.Encode(out, img)
}

func (p panel) draw(img *image.RGBA, area image.Rectangle) {
	drawText(img, area.Min.X+marginL, area.Min.Y+10, p.title, 2, ink)
	legendY := area.Min.Y + titleH - 8
	if len(p.series) > 0 {
		x := area.Min.X + marginL
		for i, s := range p.series {
			fill(img, image.Rect(x, legendY, x+12, legendY+12), palette[i%len(palette)])
			x += 16 + drawText(img, x+16, legendY+3, s, 1, ink) + 20
		}
	}
	plot := image.Rect(area.Min.X+marginL, area.Min.Y+titleH+legendRow, area.Max.X-marginR, area.Max.Y-labelH)
	top := 0.0
	for _, g := range p.values {
		for _, v := range g {
			if !math.IsNaN(v) {
				top = math.Max(top, v)
			}
		}
	}
	top = niceCeil(top)
	// Grid and axis labels.
	for i := 0; i <= 4; i++ {
		y := plot.Max.Y - (plot.Dy()*i)/4
		fill(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), grid)
		label := p.format(top * float64(i) / 4)
		drawText(img, plot.Min.X-8-textWidth(label, 1), y-3, label, 1, ink)
	}
	fill(img, image.Rect(plot.Min.X, plot.Min.Y, plot.Min.X+1, plot.Max.Y), ink)
	fill(img, image.Rect(plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y+1), ink)
	if len(p.groups) == 0 {
		return
	}
	groupW := plot.Dx() / len(p.groups)
	for gi, g := range p.groups {
		gx := plot.Min.X + gi*groupW
		n := max(len(p.values[gi]), 1)
		barW := max((groupW-16)/n, 3)
		for si, v := range p.values[gi] {
			x := gx + 8 + si*barW
			c := palette[si%len(palette)]
			if len(p.series) == 0 {
				c = palette[gi%len(palette)]
			}
			if math.IsNaN(v) {
				drawText(img, x+1, plot.Max.Y-10, "n/m", 1, ink)
				continue
			}
			h := 0
			if top > 0 {
				h = int(float64(plot.Dy()) * v / top)
			}
			fill(img, image.Rect(x+1, plot.Max.Y-h, x+barW-1, plot.Max.Y), c)
			label := p.format(v)
			if textWidth(label, 1) <= barW+4 {
				drawText(img, x+(barW-textWidth(label, 1))/2, plot.Max.Y-h-10, label, 1, ink)
			}
		}
		for li, line := range splitLines(g) {
			for textWidth(line, 1) > groupW-4 && len(line) > 1 {
				line = line[:len(line)-1]
			}
			drawText(img, gx+(groupW-textWidth(line, 1))/2, plot.Max.Y+6+li*11, line, 1, ink)
		}
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if r == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

// niceCeil rounds v up to a round number times a power of ten whose
// quarters are round too, so the four grid lines read well.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.6, 2, 2.4, 3.2, 4, 6, 8, 10} {
		if m*exp >= v {
			return m * exp
		}
	}
	return 10 * exp
}

func shortNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func shortMS(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
