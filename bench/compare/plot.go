package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// colors of the implementations in the plot, by key.
var colors = map[string]string{
	keyCore:      "#1b7837",
	keyHandler:   "#7fbf7b",
	"powertools": "#2166ac",
	"express":    "#b2182b",
}

// Plot geometry, in SVG user units.
const (
	plotWidth   = 1060
	marginLeft  = 150 // path names
	latLeft     = marginLeft
	latWidth    = 460
	cmdLeft     = latLeft + latWidth + 110
	cmdWidth    = 200
	barHeight   = 14
	barGap      = 4
	groupGap    = 22
	headerSpace = 112
)

// writeSVG draws the headline paths: p50 latency per request with a whisker to p99 (log
// scale), and Redis commands per request, one bar per implementation.
//
//cyclo:one panel after another of a fixed layout; splitting it would scatter the coordinates
func (r *Report) writeSVG(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	groupHeight := len(r.Impls)*(barHeight+barGap) + groupGap
	height := headerSpace + len(headline)*groupHeight + 56

	// The latency axis spans whole decades around every value shown.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, h := range headline {
		for _, im := range r.Impls {
			if name, ok := h.phases[im.Key]; ok {
				ph := im.Phases[name]
				if ph.P50 > 0 {
					lo = min(lo, ph.P50)
					hi = max(hi, ph.P99, ph.P50)
				}
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 10, 1000
	}
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	x := func(v float64) float64 {
		return latLeft + (math.Log10(math.Max(v, math.Pow(10, dLo)))-dLo)/(dHi-dLo)*latWidth
	}
	cmdMax := 3.0
	for _, im := range r.Impls {
		for _, ph := range im.Phases {
			cmdMax = max(cmdMax, math.Ceil(ph.CmdsPerReq))
		}
	}
	cx := func(v float64) float64 { return cmdLeft + v/cmdMax*cmdWidth }

	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
		plotWidth, height, plotWidth, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>`)
	p(`<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`,
		esc("idem against Powertools TypeScript and express + ioredis, on "+r.server()+" ("+r.Date+")"))
	p(`<text x="10" y="38" fill="#555">%s</text>`, esc(fmt.Sprintf("%s; medians of %d runs of N=%d per path; lower is better",
		r.Host, len(r.Runs), r.Settings.N)))
	// Legend, two entries per line.
	for i, im := range r.Impls {
		lx, ly := 10.0+float64(i%2)*420, 50.0+float64(i/2)*18
		p(`<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`, lx, ly, colors[im.Key])
		p(`<text x="%.1f" y="%.1f">%s</text>`, lx+16, ly+10, esc(im.Label))
	}
	top := float64(headerSpace)
	p(`<text x="%d" y="%.1f" font-weight="bold">p50 latency per request, whisker to p99 (µs, log scale)</text>`, latLeft, top-12)
	p(`<text x="%d" y="%.1f" font-weight="bold">Redis commands per request</text>`, cmdLeft, top-26)
	p(`<text x="%d" y="%.1f" fill="#555">solid: sent (round trips); pale: run inside Lua</text>`, cmdLeft, top-12)
	bottom := top + float64(len(headline)*groupHeight)
	// Axes and grid.
	for d := dLo; d <= dHi; d++ {
		v := math.Pow(10, d)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x(v), top-4, x(v), bottom)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`, x(v), bottom+14, esc(fmt.Sprintf("%g", v)))
	}
	for v := 0.0; v <= cmdMax; v++ {
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, cx(v), top-4, cx(v), bottom)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%g</text>`, cx(v), bottom+14, v)
	}

	for gi, h := range headline {
		gy := top + float64(gi*groupHeight)
		p(`<text x="10" y="%.1f" font-weight="bold">%s</text>`, gy+float64(len(r.Impls)*(barHeight+barGap))/2+4, esc(h.path))
		for ii, im := range r.Impls {
			y := gy + float64(ii*(barHeight+barGap))
			color := colors[im.Key]
			name, measured := h.phases[im.Key]
			if measured {
				ph := im.Phases[name]
				p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>`, latLeft, y, x(ph.P50)-latLeft, barHeight, color)
				if ph.P99 > ph.P50 {
					mid := y + barHeight/2
					p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`, x(ph.P50), mid, x(ph.P99), mid, color)
					p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`, x(ph.P99), y+2, x(ph.P99), y+barHeight-2, color)
				}
				p(`<text x="%.1f" y="%.1f">%s</text>`, math.Max(x(ph.P50), x(ph.P99))+5, y+barHeight-3, esc(fmt.Sprintf("%s / %s", us(ph.P50), us(ph.P99))))
				sent := sentPerReq(im.Key, ph)
				p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s" fill-opacity="0.35"/>`, cmdLeft, y, cx(ph.CmdsPerReq)-cmdLeft, barHeight, color)
				p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>`, cmdLeft, y, cx(sent)-cmdLeft, barHeight, color)
				label := fmt.Sprintf("%.2f", ph.CmdsPerReq)
				if sent != ph.CmdsPerReq {
					label = fmt.Sprintf("%.2f (%.0f sent)", ph.CmdsPerReq, sent)
				}
				p(`<text x="%.1f" y="%.1f">%s</text>`, max(cx(ph.CmdsPerReq), cx(sent))+5, y+barHeight-3, esc(label))
				continue
			}
			p(`<text x="%d" y="%.1f" fill="#777">%s</text>`, latLeft+4, y+barHeight-3, esc("measured only with concurrent duplicates"))
			if c, ok := im.Phases[cmdsPhase[im.Key]]; ok {
				p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s" fill-opacity="0.5"/>`, cmdLeft, y, cx(c.CmdsPerReq)-cmdLeft, barHeight, color)
				p(`<text x="%.1f" y="%.1f">%.2f*</text>`, cx(c.CmdsPerReq)+5, y+barHeight-3, c.CmdsPerReq)
			}
		}
	}
	p(`<text x="10" y="%.1f" fill="#555">%s</text>`, bottom+32,
		esc("Commands as INFO commandstats counts them. * from the concurrency test (50 callers per key, 20 ms of work)."))
	p(`<text x="10" y="%.1f" fill="#555">%s</text>`, bottom+48,
		esc("Express rows include a Node HTTP client and server on loopback. Tables and method: docs/"+r.Base+".md"))
	p(`</svg>`)
	_, err := io.WriteString(w, b.String())
	return err
}

// esc escapes text for SVG.
func esc(s string) string { return html.EscapeString(s) }
