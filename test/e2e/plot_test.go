//go:build e2e && bench

package e2e

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"slices"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// plotCDF draws the cumulative distribution of each latency series (milliseconds, log scale) as a PNG.
func plotCDF(path string, series map[string][]float64) error {
	const W, H, left, right, top, bottom = 900, 520, 70, 20, 40, 60
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	white := color.RGBA{255, 255, 255, 255}
	grey := color.RGBA{220, 220, 220, 255}
	black := color.RGBA{0, 0, 0, 255}
	for y := range H {
		for x := range W {
			img.Set(x, y, white)
		}
	}
	lo, hi := 1.0, 10.0
	for _, s := range series {
		for _, v := range s {
			hi = math.Max(hi, v)
		}
	}
	lx, hx := math.Log10(lo), math.Ceil(math.Log10(hi))
	px := func(ms float64) int {
		return left + int(float64(W-left-right)*(math.Log10(math.Max(ms, lo))-lx)/(hx-lx))
	}
	py := func(f float64) int { return H - bottom - int(float64(H-top-bottom)*f) }
	text := func(x, y int, s string, c color.Color) {
		d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	line := func(x0, y0, x1, y1 int, c color.Color) {
		n := max(abs(x1-x0), abs(y1-y0), 1)
		for i := 0; i <= n; i++ {
			img.Set(x0+(x1-x0)*i/n, y0+(y1-y0)*i/n, c)
		}
	}
	for e := lx; e <= hx; e++ {
		x := px(math.Pow(10, e))
		line(x, top, x, H-bottom, grey)
		text(x-10, H-bottom+16, fmt.Sprintf("%g", math.Pow(10, e)), black)
	}
	for f := 0.0; f <= 1.0; f += 0.25 {
		y := py(f)
		line(left, y, W-right, y, grey)
		text(10, y+4, fmt.Sprintf("%3.0f%%", f*100), black)
	}
	line(left, H-bottom, W-right, H-bottom, black)
	line(left, top, left, H-bottom, black)
	text(W/2-120, H-20, "pod created -> port annotation (ms, log scale)", black)
	text(left, 20, "Raven: cumulative share of pods annotated", black)
	colors := []color.RGBA{{200, 30, 30, 255}, {30, 120, 200, 255}, {30, 160, 60, 255}, {150, 60, 180, 255}}
	names := make([]string, 0, len(series))
	for k := range series {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, name := range names {
		s := slices.Clone(series[name])
		slices.Sort(s)
		c := colors[i%len(colors)]
		for j := 1; j < len(s); j++ {
			line(px(s[j-1]), py(float64(j)/float64(len(s))), px(s[j]), py(float64(j+1)/float64(len(s))), c)
		}
		text(W-right-330, top+20+16*i, fmt.Sprintf("%s (n=%d)", name, len(s)), c)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
