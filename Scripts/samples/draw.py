#!/usr/bin/env python3
"""Draws SnapThumb's synthetic sample scenes and builds its broken sample files.

Called by Scripts/make-samples.sh, which encodes, tags and checks the results:

    draw.py scenes DIR              synthetic pictures as PPM/PGM (+ a hand-made ICC profile)
    draw.py bad DIR SRC.jpg SMALL.jpg   broken files derived from valid JPEGs or written by hand

Everything is drawn from fixed seeds with numpy: no image or profile is downloaded or copied,
so the output is CC0 and the same on every run for a given numpy.
"""
import math, os, struct, sys, zlib
import numpy as np

# ---------- tiny raster helpers (all shapes anti-aliased by exact/approximate coverage)

def smoothstep(e0, e1, x):
    t = np.clip((x - e0) / (e1 - e0), 0.0, 1.0)
    return t * t * (3 - 2 * t)

def value_noise2(h, w, cells_y, cells_x, rng, octaves=4, persistence=0.5):
    """Fractal value noise in [0,1], shape (h,w)."""
    out = np.zeros((h, w)); amp = 1.0; total = 0.0
    for o in range(octaves):
        cy, cx = max(1, int(cells_y * 2 ** o)), max(1, int(cells_x * 2 ** o))
        grid = rng.random((cy + 2, cx + 2))
        y = np.linspace(0, cy, h, endpoint=False); x = np.linspace(0, cx, w, endpoint=False)
        y0 = y.astype(int); x0 = x.astype(int)
        fy = y - y0; fx = x - x0
        fy = (fy * fy * (3 - 2 * fy))[:, None]; fx = (fx * fx * (3 - 2 * fx))[None, :]
        g0 = grid[y0]; g1 = grid[y0 + 1]
        top = g0[:, x0] * (1 - fx) + g0[:, x0 + 1] * fx
        bot = g1[:, x0] * (1 - fx) + g1[:, x0 + 1] * fx
        out += amp * (top * (1 - fy) + bot * fy)
        total += amp; amp *= persistence
    return out / total

def value_noise1(n, cells, rng, octaves=4):
    out = np.zeros(n); amp = 1.0; total = 0.0
    for o in range(octaves):
        c = max(1, int(cells * 2 ** o))
        grid = rng.random(c + 2)
        x = np.linspace(0, c, n, endpoint=False); x0 = x.astype(int); f = x - x0
        f = f * f * (3 - 2 * f)
        out += amp * (grid[x0] * (1 - f) + grid[x0 + 1] * f)
        total += amp; amp *= 0.5
    return out / total

class Canvas:
    def __init__(self, w, h, channels=3):
        self.w, self.h = w, h
        self.img = np.zeros((h, w, channels))

    def _window(self, x0, y0, x1, y1):
        X0 = max(0, int(math.floor(x0)) - 1); Y0 = max(0, int(math.floor(y0)) - 1)
        X1 = min(self.w, int(math.ceil(x1)) + 1); Y1 = min(self.h, int(math.ceil(y1)) + 1)
        return X0, Y0, max(X0, X1), max(Y0, Y1)

    def blend(self, cov, colour, window=None, opacity=1.0):
        X0, Y0, X1, Y1 = window or (0, 0, self.w, self.h)
        if X1 <= X0 or Y1 <= Y0:
            return
        a = (np.clip(cov, 0, 1) * opacity)[..., None]
        col = np.asarray(colour, float)
        if col.ndim == 1:
            col = col[None, None, :]
        region = self.img[Y0:Y1, X0:X1]
        self.img[Y0:Y1, X0:X1] = region * (1 - a) + col * a

    def rect(self, x0, y0, x1, y1, colour, opacity=1.0):
        X0, Y0, X1, Y1 = self._window(x0, y0, x1, y1)
        xs = np.arange(X0, X1, dtype=float); ys = np.arange(Y0, Y1, dtype=float)
        cx = np.clip(np.minimum(xs + 1, x1) - np.maximum(xs, x0), 0, 1)
        cy = np.clip(np.minimum(ys + 1, y1) - np.maximum(ys, y0), 0, 1)
        self.blend(cy[:, None] * cx[None, :], colour, (X0, Y0, X1, Y1), opacity)

    def circle(self, cx, cy, r, colour, opacity=1.0):
        X0, Y0, X1, Y1 = self._window(cx - r, cy - r, cx + r, cy + r)
        yy, xx = np.mgrid[Y0:Y1, X0:X1] + 0.5
        d = np.hypot(xx - cx, yy - cy)
        self.blend(np.clip(r - d + 0.5, 0, 1), colour, (X0, Y0, X1, Y1), opacity)

    def polygon(self, pts, colour, opacity=1.0):
        """Convex polygon, any winding."""
        pts = [(float(x), float(y)) for x, y in pts]
        xs_, ys_ = zip(*pts)
        X0, Y0, X1, Y1 = self._window(min(xs_), min(ys_), max(xs_), max(ys_))
        yy, xx = np.mgrid[Y0:Y1, X0:X1] + 0.5
        area = sum(pts[i][0] * pts[(i + 1) % len(pts)][1] - pts[(i + 1) % len(pts)][0] * pts[i][1]
                   for i in range(len(pts)))
        sign = 1.0 if area > 0 else -1.0
        sd = np.full(xx.shape, -1e9)
        for i in range(len(pts)):
            (ax, ay), (bx, by) = pts[i], pts[(i + 1) % len(pts)]
            ex, ey = bx - ax, by - ay
            L = math.hypot(ex, ey)
            # outward distance for a counter-clockwise (area>0 in y-down coords) polygon
            dist = sign * ((xx - ax) * ey - (yy - ay) * ex) / L
            sd = np.maximum(sd, dist)
        self.blend(np.clip(0.5 - sd, 0, 1), colour, (X0, Y0, X1, Y1), opacity)

# 5x7 block glyphs
GLYPHS = {
    "T": ["11111", "00100", "00100", "00100", "00100", "00100", "00100"],
    "O": ["01110", "10001", "10001", "10001", "10001", "10001", "01110"],
    "P": ["11110", "10001", "10001", "11110", "10000", "10000", "10000"],
    "1": ["00100", "01100", "00100", "00100", "00100", "00100", "01110"],
    "2": ["01110", "10001", "00001", "00010", "00100", "01000", "11111"],
    "3": ["11110", "00001", "00001", "01110", "00001", "00001", "11110"],
}

def text(c, s, x, y, cell, colour, shadow=(0.05, 0.05, 0.08)):
    for pass_, col, off in ((0, shadow, cell * 0.35), (1, colour, 0.0)):
        cx = x
        for ch in s:
            rows = GLYPHS[ch]
            for j, row in enumerate(rows):
                for i, bit in enumerate(row):
                    if bit == "1":
                        c.rect(cx + i * cell + off, y + j * cell + off,
                               cx + (i + 1) * cell + off, y + (j + 1) * cell + off, col)
            cx += 6.5 * cell

def text_width(s, cell):
    return (len(s) * 6.5 - 1.5) * cell

# ---------- the scene

def scene(w, h, seed, sat=1.0, grain=0.006, texture=1.0, markers=True, frame=None, flowers=True, clouds=True, vignette=0.10, glow=0.35):
    """A photo-like landscape in sRGB floats [0,1], shape (h,w,3).

    Asymmetric on purpose: a big red block in the top-left corner, a blue/white
    checker in the top-right corner, the word TOP near the top edge, the sun
    right of centre, a house on the left."""
    rng = np.random.default_rng(seed)
    s = min(w, h)
    c = Canvas(w, h)
    yy = (np.arange(h) + 0.5)[:, None]; xx = (np.arange(w) + 0.5)[None, :]

    # sky
    t = np.clip(yy / (0.64 * h), 0, 1) ** 0.8
    top = np.array([0.10, 0.30, 0.68]); hor = np.array([0.80, 0.88, 0.95])
    c.img[:] = (top * (1 - t[..., None]) + hor * t[..., None])
    sun_x, sun_y, sun_r = 0.66 * w, 0.25 * h, 0.065 * s
    if frame is not None:
        sun_y += frame * 0.05 * h
    d = np.hypot(xx - sun_x, yy - sun_y)
    c.img += np.array([1.0, 0.80, 0.45]) * (glow * np.exp(-d / (0.22 * s)))[..., None]

    # clouds
    n = value_noise2(h, w, 5, max(2, round(2.5 * w / h)), rng, octaves=5)
    cov = smoothstep(0.55, 0.72, n) * (1 - smoothstep(0.30 * h, 0.58 * h, yy))
    shade = value_noise2(h, w, 10, max(2, round(5 * w / h)), rng, octaves=3)
    cloud = np.stack([0.96 - 0.18 * shade, 0.96 - 0.16 * shade, 0.98 - 0.10 * shade], axis=-1)
    if clouds:
        c.blend(cov * 0.9, cloud)
    c.circle(sun_x, sun_y, sun_r, (1.0, 0.95, 0.72))

    # balloons and a kite (coloured shapes)
    dx = 0 if frame is None else frame * 0.06 * w
    for bx, by, r, col in ((0.29, 0.34, 0.040, (0.90, 0.10, 0.15)),
                           (0.35, 0.40, 0.033, (0.10, 0.72, 0.22)),
                           (0.25, 0.45, 0.030, (0.15, 0.30, 0.92))):
        X, Y, R = bx * w + dx, by * h, r * s
        c.rect(X - 0.002 * s, Y + R, X + 0.002 * s, Y + R + 0.12 * s, (0.25, 0.25, 0.25))
        c.circle(X, Y, R, col)
        c.circle(X - 0.35 * R, Y - 0.35 * R, 0.25 * R, (1, 1, 1), opacity=0.45)
    kx, ky, kr = 0.84 * w, 0.42 * h, 0.05 * s
    c.polygon([(kx, ky - kr), (kx + 0.7 * kr, ky), (kx, ky + 1.4 * kr), (kx - 0.7 * kr, ky)], (1.0, 0.55, 0.05))
    c.polygon([(kx, ky - kr), (kx + 0.7 * kr, ky), (kx, ky)], (0.85, 0.15, 0.55))
    c.rect(kx - 0.0015 * s, ky + 1.4 * kr, kx + 0.0015 * s, ky + 3.2 * kr, (0.3, 0.3, 0.3))

    # far hills, hazy
    x1 = np.arange(w) + 0.5
    ridge1 = h * (0.56 + 0.035 * np.sin(2 * np.pi * x1 / w * 1.3 + 0.7)
                  + 0.06 * (value_noise1(w, 4, rng) - 0.5))
    tex = value_noise2(h, w, 12, max(2, round(12 * w / h)), rng, octaves=4)
    tex = 0.5 + texture * (tex - 0.5)
    far = np.stack([0.40 + 0.05 * tex, 0.53 + 0.06 * tex, 0.58 + 0.04 * tex], axis=-1)
    c.blend(np.clip(yy - ridge1[None, :] + 0.5, 0, 1), far)

    # near hills, grassy, with texture and darkening towards the bottom
    ridge2 = h * (0.68 + 0.045 * np.sin(2 * np.pi * x1 / w * 0.8 + 2.1)
                  + 0.05 * (value_noise1(w, 6, rng) - 0.5))
    grass_tex = value_noise2(h, w, 30, max(2, round(30 * w / h)), rng, octaves=4)
    depth = np.clip((yy - ridge2[None, :]) / h, 0, 1)
    k = (0.80 + 0.45 * texture * (grass_tex - 0.5)) * (1 - 0.9 * depth)
    grass = np.stack([0.28 * k, 0.58 * k, 0.16 * k], axis=-1)
    c.blend(np.clip(yy - ridge2[None, :] + 0.5, 0, 1), grass)

    # a winding path from the bottom to the horizon
    base = ridge2.min()
    v = np.clip((yy - base) / (h - base), 0, 1)
    centre = w * (0.62 + 0.07 * np.sin(v * 5.0))
    half = w * (0.004 + 0.10 * v ** 1.4)
    path_cov = np.clip(half - np.abs(xx - centre) + 0.5, 0, 1) * (yy > ridge2[None, :] + 2)
    pt = 0.5 + texture * (grass_tex - 0.5)
    path = np.stack([0.74 + 0.10 * pt, 0.64 + 0.09 * pt, 0.48 + 0.08 * pt], axis=-1)
    c.blend(path_cov * (0.35 + 0.65 * v), path)

    # house on the left
    hx = 0.14 * w; hw = 0.16 * s
    gy = ridge2[int(min(w - 1, hx + hw / 2))] + 0.03 * h
    wh = 0.12 * s
    c.rect(hx + 0.10 * hw, gy - wh - 0.22 * hw, hx + 0.22 * hw, gy - wh + 0.05 * hw, (0.45, 0.25, 0.20))
    c.rect(hx, gy - wh, hx + hw, gy, (0.90, 0.84, 0.68))
    c.polygon([(hx - 0.08 * hw, gy - wh + 1), (hx + hw / 2, gy - wh - 0.55 * hw), (hx + 1.08 * hw, gy - wh + 1)], (0.72, 0.14, 0.10))
    c.rect(hx + 0.62 * hw, gy - 0.55 * wh, hx + 0.82 * hw, gy, (0.35, 0.20, 0.12))
    c.rect(hx + 0.15 * hw, gy - 0.75 * wh, hx + 0.42 * hw, gy - 0.40 * wh, (0.55, 0.75, 0.95))
    c.rect(hx + 0.275 * hw, gy - 0.75 * wh, hx + 0.295 * hw, gy - 0.40 * wh, (0.95, 0.95, 0.95))

    # trees
    for fx, size in ((0.42, 1.0), (0.48, 0.8), (0.86, 1.2), (0.93, 0.9)):
        tx = fx * w; r = 0.045 * s * size
        ty = ridge2[int(min(w - 1, tx))] + 0.02 * h
        c.rect(tx - 0.18 * r, ty - 1.6 * r, tx + 0.18 * r, ty, (0.36, 0.24, 0.14))
        c.circle(tx, ty - 1.9 * r, r, (0.10, 0.33, 0.12))
        c.circle(tx - 0.45 * r, ty - 1.6 * r, 0.7 * r, (0.12, 0.38, 0.13))
        c.circle(tx + 0.25 * r, ty - 2.3 * r, 0.55 * r, (0.16, 0.45, 0.16))

    # flowers in the foreground
    n_fl = 0 if not flowers else int(60 * w * h / 480000) + 8
    cols = [(0.95, 0.85, 0.10), (0.90, 0.20, 0.55), (0.98, 0.98, 0.98), (0.60, 0.25, 0.85)]
    for i in range(n_fl):
        fx = rng.random() * w
        fy = ridge2[int(fx)] + 0.02 * h + rng.random() * (h - ridge2[int(fx)])
        r = (0.002 + 0.005 * (fy / h) ** 3) * s
        c.circle(fx, fy, max(r, 0.8), cols[i % 4])

    # colour saturation and a gentle vignette
    lum = c.img @ np.array([0.2126, 0.7152, 0.0722])
    c.img = lum[..., None] + (c.img - lum[..., None]) * sat
    r2 = ((xx - w / 2) / (w / 2)) ** 2 + ((yy - h / 2) / (h / 2)) ** 2
    c.img *= (1 - vignette * r2)[..., None]

    if markers:
        # big red block, top-left corner (wider than tall)
        c.rect(0, 0, 0.22 * w, 0.18 * h, (0.86, 0.07, 0.07))
        c.rect(0.22 * w - 0.012 * s, 0, 0.22 * w, 0.18 * h, (0.45, 0.02, 0.02))
        c.rect(0, 0.18 * h - 0.012 * s, 0.22 * w, 0.18 * h, (0.45, 0.02, 0.02))
        # blue/white checker, top-right corner
        m = 0.14 * s; mx = w - m - 0.03 * s; my = 0.03 * s
        c.rect(mx - 0.01 * s, my - 0.01 * s, mx + m + 0.01 * s, my + m + 0.01 * s, (0.05, 0.05, 0.10))
        for j in range(4):
            for i in range(4):
                col = (0.10, 0.25, 0.90) if (i + j) % 2 == 0 else (0.97, 0.97, 0.97)
                c.rect(mx + i * m / 4, my + j * m / 4, mx + (i + 1) * m / 4, my + (j + 1) * m / 4, col)
        # TOP, near the top edge, centred
        cell = 0.016 * s
        text(c, "TOP", w / 2 - text_width("TOP", cell) / 2, 0.035 * h, cell, (1.0, 1.0, 1.0))
    if frame is not None:
        cell = 0.05 * s
        text(c, str(frame + 1), w - 6 * cell, h - 8.5 * cell, cell, (1.0, 0.95, 0.2))

    if grain > 0:
        c.img += rng.normal(0, grain, (h, w, 1))
    return np.clip(c.img, 0, 1)

# ---------- writers

def to8(a):
    return (np.clip(a, 0, 1) * 255 + 0.5).astype(np.uint8)

def to16(a):
    return (np.clip(a, 0, 1) * 65535 + 0.5).astype(">u2")

def write_pnm(path, a):
    a = np.ascontiguousarray(a)
    h, w = a.shape[:2]
    magic = "P6" if a.ndim == 3 else "P5"
    maxval = 65535 if a.dtype.itemsize == 2 else 255
    with open(path, "wb") as f:
        f.write(f"{magic}\n{w} {h}\n{maxval}\n".encode())
        f.write(a.tobytes())

def inverse_orientation(a, n):
    """Stored pixels for EXIF orientation n, so that applying n shows `a`."""
    return {
        1: lambda a: a,
        2: lambda a: a[:, ::-1],                      # mirror horizontal (self-inverse)
        3: lambda a: a[::-1, ::-1],                   # rotate 180 (self-inverse)
        4: lambda a: a[::-1, :],                      # mirror vertical (self-inverse)
        5: lambda a: a.transpose(1, 0, 2),            # transpose (self-inverse)
        6: lambda a: np.rot90(a, 1),                  # viewer turns 90 CW, so store 90 CCW
        7: lambda a: a[::-1, ::-1].transpose(1, 0, 2),  # transverse (self-inverse)
        8: lambda a: np.rot90(a, -1),                 # viewer turns 90 CCW, so store 90 CW
    }[n](a)

def swatches(cell=72, border=6):
    """Pure primaries and secondaries; meant to be pasted after a transform to a
    wide-gamut space, so they lie outside sRGB."""
    cols = [(1, 0, 0), (1, 1, 0), (0, 1, 0), (0, 1, 1), (0, 0, 1), (1, 0, 1)]
    w = len(cols) * cell + (len(cols) + 1) * border
    a = np.ones((cell + 2 * border, w, 3))
    for i, col in enumerate(cols):
        x0 = border + i * (cell + border)
        a[border:border + cell, x0:x0 + cell] = col
    return a

# ---------- ICC profiles, built from published numbers (no third-party data)

D50 = np.array([0.9642, 1.0, 0.8249])
BRADFORD = np.array([[0.8951, 0.2664, -0.1614], [-0.7502, 1.7135, 0.0367], [0.0389, -0.0685, 1.0296]])

def adapt(src, dst):
    """Bradford chromatic adaptation matrix from white `src` to white `dst` (XYZ)."""
    return np.linalg.inv(BRADFORD) @ np.diag((BRADFORD @ dst) / (BRADFORD @ src)) @ BRADFORD

def xy_to_XYZ(x, y):
    return np.array([x / y, 1.0, (1 - x - y) / y])

def rgb_to_xyz_matrix(r, g, b, white):
    prim = np.array([xy_to_XYZ(*r), xy_to_XYZ(*g), xy_to_XYZ(*b)]).T
    return prim * np.linalg.solve(prim, xy_to_XYZ(*white))

def s15(v):
    return struct.pack(">i", int(round(v * 65536)))

def xyz_tag(v):
    return b"XYZ " + b"\0" * 4 + b"".join(s15(x) for x in v)

def text_tag(s):
    return b"text" + b"\0" * 4 + s.encode("ascii") + b"\0"

def desc_tag(s):
    b = s.encode("ascii") + b"\0"
    return (b"desc" + b"\0" * 4 + struct.pack(">I", len(b)) + b + struct.pack(">II", 0, 0)
            + struct.pack(">HB", 0, 0) + b"\0" * 67)

def icc_profile(cls, space, pcs, tags):
    """An ICC v2.1 profile: 128-byte header, tag table, tag data (identical tag
    bodies are stored once and shared)."""
    table_size = 4 + 12 * len(tags)
    offset = 128 + table_size
    table = struct.pack(">I", len(tags)); data = b""; seen = {}
    for sig, body in tags:
        if body not in seen:
            while len(data) % 4:
                data += b"\0"
            seen[body] = offset + len(data); data += body
        table += sig + struct.pack(">II", seen[body], len(body))
    while len(data) % 4:
        data += b"\0"
    size = 128 + table_size + len(data)
    header = (struct.pack(">I", size) + b"\0" * 4 + struct.pack(">I", 0x02100000) + cls + space + pcs
              + struct.pack(">6H", 2024, 1, 1, 0, 0, 0) + b"acsp" + b"\0" * 16 + b"\0" * 8
              + struct.pack(">I", 0) + s15(D50[0]) + s15(D50[1]) + s15(D50[2]))
    header += b"\0" * (128 - len(header))
    return header + table + data

CC0 = "CC0 - generated by SnapThumb Scripts/make-samples.sh"

def a98_compatible_icc():
    """Matrix/TRC display profile with the published Adobe RGB (1998) primaries,
    D65 white and gamma 563/256, colorants Bradford-adapted to D50."""
    d65 = xy_to_XYZ(0.3127, 0.3290)
    M = adapt(d65, D50) @ rgb_to_xyz_matrix((0.64, 0.33), (0.21, 0.71), (0.15, 0.06), (0.3127, 0.3290))
    curv = b"curv" + b"\0" * 4 + struct.pack(">IH", 1, 563) + b"\0\0"
    return icc_profile(b"mntr", b"RGB ", b"XYZ ", [
        (b"desc", desc_tag("A98-compatible RGB (SnapThumb, CC0)")),
        (b"cprt", text_tag(CC0)),
        (b"wtpt", xyz_tag(d65)),
        (b"rXYZ", xyz_tag(M[:, 0])), (b"gXYZ", xyz_tag(M[:, 1])), (b"bXYZ", xyz_tag(M[:, 2])),
        (b"rTRC", curv), (b"gTRC", curv), (b"bTRC", curv),
    ])

# A simple CMYK printer model: inks multiply the (sRGB-encoded) reflectance of
# white paper; solid black leaves 8 %; 70 % grey component replacement.
KMAX, GCR = 0.92, 0.7
SRGB_D50 = adapt(xy_to_XYZ(0.3127, 0.3290), D50) @ rgb_to_xyz_matrix(
    (0.64, 0.33), (0.30, 0.60), (0.15, 0.06), (0.3127, 0.3290))

def cmyk_to_rgb(cmyk):
    c, m, y, k = np.moveaxis(cmyk, -1, 0)
    kk = 1 - KMAX * k
    return np.stack([(1 - c) * kk, (1 - m) * kk, (1 - y) * kk], axis=-1)

def rgb_to_cmyk(rgb):
    rgb = np.clip(rgb, 0, 1)
    k = GCR * (1 - rgb.max(axis=-1)) / KMAX
    cmy = 1 - rgb / (1 - KMAX * k)[..., None]
    return np.concatenate([np.clip(cmy, 0, 1), k[..., None]], axis=-1)

def _lab_f(t):
    d = 6 / 29
    return np.where(t > d ** 3, np.cbrt(t), t / (3 * d * d) + 4 / 29)

def _lab_finv(t):
    d = 6 / 29
    return np.where(t > d, t ** 3, 3 * d * d * (t - 4 / 29))

def srgb_to_lab(rgb):
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    fx, fy, fz = np.moveaxis(_lab_f(lin @ SRGB_D50.T / D50), -1, 0)
    return np.stack([116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)], axis=-1)

def lab_to_srgb(lab):
    L, a, b = np.moveaxis(lab, -1, 0)
    fy = (L + 16) / 116
    xyz = np.stack([_lab_finv(fy + a / 500), _lab_finv(fy), _lab_finv(fy - b / 200)], axis=-1) * D50
    lin = np.clip(xyz @ np.linalg.inv(SRGB_D50).T, 0, 1)
    return np.where(lin <= 0.0031308, lin * 12.92, 1.055 * lin ** (1 / 2.4) - 0.055)

def mft2(inputs, outputs, grid, table):
    """lut16Type with identity matrix and linear input/output tables."""
    head = b"mft2" + b"\0" * 4 + struct.pack(">BBBB", inputs, outputs, grid, 0)
    head += b"".join(s15(1.0 if i % 4 == 0 else 0.0) for i in range(9))
    head += struct.pack(">HH", 2, 2)
    lin = struct.pack(">HH", 0, 65535)
    return head + lin * inputs + np.asarray(table).astype(">u2").tobytes() + lin * outputs

def cmyk_icc(a2b_grid=9, b2a_grid=17):
    """Output profile, PCS Lab (ICC v2 16-bit encoding), A2B and B2A as lut16."""
    g = np.linspace(0, 1, a2b_grid)
    cmyk = np.stack(np.meshgrid(g, g, g, g, indexing="ij"), axis=-1).reshape(-1, 4)
    L, a, b = np.moveaxis(srgb_to_lab(cmyk_to_rgb(cmyk)), -1, 0)
    enc = np.stack([L / 100 * 65280, (a + 128) * 256, (b + 128) * 256], axis=-1)
    a2b = mft2(4, 3, a2b_grid, np.clip(np.round(enc), 0, 65535))
    e = np.linspace(0, 65535, b2a_grid)
    E = np.stack(np.meshgrid(e, e, e, indexing="ij"), axis=-1).reshape(-1, 3)
    lab = np.stack([E[:, 0] / 65280 * 100, E[:, 1] / 256 - 128, E[:, 2] / 256 - 128], axis=-1)
    b2a = mft2(3, 4, b2a_grid, np.clip(np.round(rgb_to_cmyk(lab_to_srgb(lab)) * 65535), 0, 65535))
    return icc_profile(b"prtr", b"CMYK", b"Lab ", [
        (b"desc", desc_tag("Simple CMYK (SnapThumb, CC0)")),
        (b"cprt", text_tag(CC0)),
        (b"wtpt", xyz_tag(D50)),
        (b"A2B0", a2b), (b"A2B1", a2b), (b"B2A0", b2a), (b"B2A1", b2a),
    ])

def cmd_scenes(d):
    up = scene(600, 400, seed=1, grain=0.003)
    write_pnm(f"{d}/upright.ppm", to8(up))  # also the source of the orientation set
    u8 = to8(up)
    for n in range(1, 9):
        write_pnm(f"{d}/orient-{n}.ppm", inverse_orientation(u8, n))
    write_pnm(f"{d}/portrait.ppm", to8(scene(1080, 1440, seed=2)))
    write_pnm(f"{d}/rotated.ppm", inverse_orientation(to8(scene(1080, 1440, seed=3)), 6))
    write_pnm(f"{d}/gps.ppm", to8(scene(1080, 1440, seed=4)))
    write_pnm(f"{d}/p3.ppm", to8(scene(1024, 768, seed=5, sat=1.35)))
    write_pnm(f"{d}/a98.ppm", to8(scene(1024, 768, seed=6, sat=1.35)))
    write_pnm(f"{d}/swatches.ppm", to8(swatches()))
    write_pnm(f"{d}/cmyk.ppm", to8(scene(800, 600, seed=7)))
    write_pnm(f"{d}/heic.ppm", to8(scene(1512, 2016, seed=8, sat=1.25, grain=0.006)))
    write_pnm(f"{d}/sixteen.ppm", to16(scene(600, 800, seed=9, grain=0.0, texture=0.0, flowers=False, clouds=False,
                                                   vignette=0.0, glow=0.0)))
    write_pnm(f"{d}/webp.ppm", to8(scene(1200, 900, seed=10)))
    for k in range(3):
        write_pnm(f"{d}/frame{k}.ppm", to8(scene(200, 200, seed=11, grain=0.0, frame=k)))
    write_pnm(f"{d}/tiny-src.ppm", to8(scene(320, 240, seed=12, grain=0.0)))
    write_pnm(f"{d}/grey.ppm", to8(scene(800, 600, seed=13)))
    write_pnm(f"{d}/bad-src.ppm", to8(scene(800, 600, seed=14)))
    write_pnm(f"{d}/small.ppm", to8(scene(64, 48, seed=15, grain=0.0)))
    write_pnm(f"{d}/tiff.ppm", to8(scene(160, 120, seed=16, grain=0.0)))
    sticker(d)
    with open(f"{d}/a98.icc", "wb") as f:
        f.write(a98_compatible_icc())
    with open(f"{d}/cmyk.icc", "wb") as f:
        f.write(cmyk_icc())

def sticker(d):
    """RGBA sticker: opaque badge with a white rim, a soft half-transparent shadow,
    and fully transparent surroundings whose hidden RGB is magenta, so a resize
    that does not premultiply shows magenta fringes. Drawn premultiplied
    (r*a, g*a, b*a, a), then un-premultiplied, so edge pixels carry the shape's
    own colour, never the magenta."""
    w = h = 400
    c = Canvas(w, h, channels=4)
    cx, cy, R = 190, 185, 150
    yy, xx = np.mgrid[0:h, 0:w] + 0.5
    dsh = np.hypot(xx - cx - 14, yy - cy - 16)
    c.blend(0.45 * np.clip((R + 14 - dsh) / 22, 0, 1), (0, 0, 0, 1))
    c.circle(cx, cy, R, (1, 1, 1, 1))
    c.circle(cx, cy, R - 12, (0.98, 0.55, 0.10, 1))
    c.circle(cx, cy, R - 40, (1.0, 0.80, 0.20, 1))
    c.rect(cx - 95, cy - 95, cx - 45, cy - 45, (0.85, 0.05, 0.05, 1))
    text(c, "TOP", cx - text_width("TOP", 7) / 2, cy - 25, 7, (0.15, 0.10, 0.40, 1), shadow=(1, 1, 1, 1))
    c.circle(cx + 60, cy + 70, 18, (0.10, 0.30, 0.90, 1))
    a = np.clip(c.img[..., 3], 0, 1)
    a8 = to8(a)
    rgb = c.img[..., :3] / np.maximum(a, 1e-9)[..., None]
    rgb[a8 == 0] = (1.0, 0.0, 1.0)
    write_pnm(f"{d}/sticker-rgb.ppm", to8(rgb))
    write_pnm(f"{d}/sticker-a.pgm", a8)

# ---------- broken files

def jpeg_segments(b):
    """(marker, start, length) for every marker segment up to SOS; then the scan."""
    assert b[:2] == b"\xff\xd8"
    i = 2; out = []
    while i < len(b):
        assert b[i] == 0xFF, f"bad marker at {i}"
        m = b[i + 1]
        if m == 0xFF:
            i += 1; continue
        L = struct.unpack(">H", b[i + 2:i + 4])[0]
        out.append((m, i, L))
        if m == 0xDA:
            break
        i += 2 + L
    return out

def cmd_bad(d, src_jpeg, small_jpeg):
    b = open(src_jpeg, "rb").read()
    # truncated: first half of the bytes
    open(f"{d}/truncated.jpg", "wb").write(b[: len(b) // 2])
    # corrupt: 1.5 KB of pseudo-random garbage in the middle of the entropy-coded data
    segs = jpeg_segments(b)
    m, start, L = segs[-1]
    scan0 = start + 2 + L
    scan1 = b.rindex(b"\xff\xd9")
    mid = (scan0 + scan1) // 2
    rng = np.random.default_rng(1234)
    junk = rng.integers(0, 256, 1536, dtype=np.uint8).tobytes()
    cb = bytearray(b); cb[mid:mid + len(junk)] = junk
    open(f"{d}/corrupt.jpg", "wb").write(bytes(cb))
    # bomb.jpg: SOF0 claims 60000x60000
    s = bytearray(open(small_jpeg, "rb").read())
    sof = [x for x in jpeg_segments(bytes(s)) if x[0] == 0xC0]
    assert len(sof) == 1, "expected one baseline SOF0"
    _, start, _ = sof[0]
    # FF C0 Lh Ll P Yh Yl Xh Xl
    s[start + 5:start + 7] = struct.pack(">H", 60000)
    s[start + 7:start + 9] = struct.pack(">H", 60000)
    open(f"{d}/bomb.jpg", "wb").write(bytes(s))
    # bomb.png: IHDR 60000x60000 8-bit grey; IDAT holds only the first 256 rows (zeros),
    # flushed but not finished, so the file is small while the header promises 3.6 Gpx.
    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data) & 0xFFFFFFFF)
    W = H = 60000
    z = zlib.compressobj(9)
    row = b"\0" * (W + 1)
    idat = b"".join(z.compress(row) for _ in range(256)) + z.flush(zlib.Z_SYNC_FLUSH)
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    open(f"{d}/bomb.png", "wb").write(png)
    # document.pdf: one page, a red square and a line of text, correct xref
    content = (b"1 0 0 rg 20 20 60 60 re f\n"
               b"BT /F1 14 Tf 95 45 Td (SnapThumb sample PDF) Tj ET\n")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"endstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    pdf = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"; offs = []
    for i, o in enumerate(objs, 1):
        offs.append(len(pdf))
        pdf += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(pdf)
    pdf += b"xref\n0 %d\n" % (len(objs) + 1) + b"0000000000 65535 f \n"
    pdf += b"".join(b"%010d 00000 n \n" % o for o in offs)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    open(f"{d}/document.pdf", "wb").write(pdf)
    # vector.svg
    open(f"{d}/vector.svg", "w").write(
        '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80" viewBox="0 0 120 80">\n'
        '  <rect width="120" height="80" fill="#87ceeb"/>\n'
        '  <rect width="30" height="20" fill="#dc1414"/>\n'
        '  <circle cx="80" cy="30" r="12" fill="#ffd83a"/>\n'
        '  <path d="M0 80 L0 55 Q40 40 70 58 T120 50 L120 80 Z" fill="#3f8f2a"/>\n'
        '  <text x="44" y="14" font-family="sans-serif" font-size="10" fill="#fff">TOP</text>\n'
        '</svg>\n')
    # not-an-image.jpg
    open(f"{d}/not-an-image.jpg", "w").write(
        "This is a plain text file with a .jpg name.\n"
        "SnapThumb must sniff the bytes, not trust the extension, and refuse it.\n")
    # empty.png
    open(f"{d}/empty.png", "wb").close()

if __name__ == "__main__":
    if sys.argv[1] == "scenes":
        cmd_scenes(sys.argv[2])
    elif sys.argv[1] == "bad":
        cmd_bad(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit("usage: draw.py scenes DIR | bad DIR SRC.jpg SMALL.jpg")
