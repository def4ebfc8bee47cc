#!/usr/bin/env python3
"""Pixel-art measures: how a pixel grid differs from the plain box average of the same square.

The same measures as SnapThumbBench's PixelArtMeasures (Swift); both in OKLab:

  chroma     mean chroma of the grid's cells / the average's
  spread     standard deviation of the cells' lightness / the average's
  contrast   mean OKLab distance between 4-neighbouring cells / the average's
  colours    distinct colours in the grid
  drift      mean OKLab distance of a grid cell from the average's cell (faithfulness)

The average is the reference square (see quality.py's `reference`) shrunk by
`side / grid` with a plain box mean, rounded to 8 bits. Issue 29's targets for the
default style: chroma >= 1.15, spread >= 1.10, contrast >= 1.20, >= 12 colours,
drift <= 0.06.

Used by quality.py (--pixel-styles) and Scripts/pixel-gallery.py; run alone to measure
grids already made:  pixel_measures.py GRID.png SQUARE.png
"""
import sys

import numpy as np

_M1 = np.array([[0.4122214708, 0.5363325363, 0.0514459929],
                [0.2119034982, 0.6806995451, 0.1073969566],
                [0.0883024619, 0.2817188376, 0.6299787005]])
_M2 = np.array([[0.2104542553, 0.7936177850, -0.0040720468],
                [1.9779984951, -2.4285922050, 0.4505937099],
                [0.0259040371, 0.7827717662, -0.8086757660]])


def oklab(rgb):
    """8-bit sRGB array (..., 3) to OKLab (..., 3)."""
    c = np.asarray(rgb, dtype=float) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return np.cbrt(lin @ _M1.T) @ _M2.T


def box_average(square, grid):
    """The plain box mean of an (S, S, 3) 8-bit square down to (grid, grid, 3), rounded."""
    s = np.asarray(square, dtype=float)
    f = s.shape[0] // grid
    s = s[:grid * f, :grid * f]
    return np.floor(s.reshape(grid, f, grid, f, 3).mean(axis=(1, 3)) + 0.5)


def _neighbour_contrast(lab):
    h = np.linalg.norm(lab[:, 1:] - lab[:, :-1], axis=-1)
    v = np.linalg.norm(lab[1:] - lab[:-1], axis=-1)
    return (h.sum() + v.sum()) / (h.size + v.size)


def measures(grid_rgb, average_rgb):
    """The five measures of an (N, N, 3) 8-bit grid against the (N, N, 3) box average."""
    g, a = oklab(grid_rgb), oklab(average_rgb)

    def chroma(x):
        return np.hypot(x[..., 1], x[..., 2]).mean()

    return {
        "chroma": chroma(g) / chroma(a),
        "spread": g[..., 0].std() / a[..., 0].std(),
        "contrast": _neighbour_contrast(g) / _neighbour_contrast(a),
        "colours": len({tuple(p) for p in np.asarray(grid_rgb).reshape(-1, 3).astype(int).tolist()}),
        "drift": np.linalg.norm(g - a, axis=-1).mean(),
    }


TARGETS = {"chroma": (">=", 1.15), "spread": (">=", 1.10), "contrast": (">=", 1.20), "colours": (">=", 12),
           "drift": ("<=", 0.06)}


def mean_measures(rows):
    return {k: float(np.mean([r[k] for r in rows])) for k in TARGETS}


def format_row(m):
    return "%.2f× / %.2f× / %.2f× / %.1f / %.3f" % (m["chroma"], m["spread"], m["contrast"], m["colours"], m["drift"])


if __name__ == "__main__":
    from PIL import Image
    grid = np.asarray(Image.open(sys.argv[1]).convert("RGB"))
    square = np.asarray(Image.open(sys.argv[2]).convert("RGB"))
    print(format_row(measures(grid, box_average(square, grid.shape[0]))))
