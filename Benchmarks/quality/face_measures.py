#!/usr/bin/env python3
"""Faces in the pixel art (issue 38): drawn, retro and soft against PixelOE and the plain box
average on the same squares of make_people.py's photos.

    face_measures.py --snapthumb BIN --dir DIR [--pixeloe shared/tools/pixeloe] [--limit N]
    (FACES_ONLY=1: only the photos whose square came from faces)

For each photo the square is the manifest's own crop rectangle of the original (Lanczos to
100 px, as the pipeline); face cells are the cells whose centre lies in a known face box.
Per method, in OKLab, means over photos:

  face dL        face cells' lightness minus the box average's (0 keeps the face as light)
  dark in face   share of face cells more than 0.15 darker than the face's average lightness
  skin kept      share of face cells whose hue and chroma (a, b) lie within 0.05 of the face's
                 average colour's (lightness is face dL's measure); skin kept ΔE: within 0.1
                 in all three (a lighter face counts against it)
  isolated dark  cells darker than all 8 neighbours by more than 0.08, per image
and issue 29's measures against the average (chroma, spread, contrast, colours, drift)."""
import argparse, glob, json, os, subprocess, sys, tempfile
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pixel_measures import oklab, box_average, measures  # noqa: E402


def face_mask(faces, left, top, side, n=25):
    mask = np.zeros((n, n), bool)
    for x, y, w, h in faces:
        x0, y0 = (x - left) / side * n, (y - top) / side * n
        x1, y1 = (x + w - left) / side * n, (y + h - top) / side * n
        for cy in range(n):
            for cx in range(n):
                if x0 <= cx + 0.5 <= x1 and y0 <= cy + 0.5 <= y1:
                    mask[cy, cx] = True
    return mask


def isolated_dark(lab):
    L = lab[..., 0]
    count = 0
    for y in range(1, L.shape[0] - 1):
        for x in range(1, L.shape[1] - 1):
            nb = np.delete(L[y - 1:y + 2, x - 1:x + 2].ravel(), 4)
            count += nb.min() - L[y, x] > 0.08
    return count


def face_measures(grid, avg, mask):
    g, a = oklab(grid), oklab(avg)
    if not mask.any():
        return {"isolated": isolated_dark(g)}
    skin = a[mask].mean(axis=0)
    return {"face_dL": float((g[mask][:, 0] - a[mask][:, 0]).mean()),
            "dark_in_face": float((g[mask][:, 0] < skin[0] - 0.15).mean()),
            "skin_kept": float((np.linalg.norm(g[mask][:, 1:] - skin[1:], axis=-1) < 0.05).mean()),
            "skin_kept_dE": float((np.linalg.norm(g[mask] - skin, axis=-1) < 0.1).mean()),
            "isolated": isolated_dark(g)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapthumb", required=True); ap.add_argument("--dir", required=True); ap.add_argument("--pixeloe", help="shared/tools/pixeloe, for PixelOE beside the styles")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    if a.pixeloe:
        sys.path.insert(0, a.pixeloe)
        import pixeloe_anchor
    truth = {}
    for line in open(os.path.join(a.dir, "truth.tsv")):
        p = line.rstrip("\n").split("\t")
        truth[p[0]] = [tuple(map(float, x.split(","))) for x in p[3:]]
    names = sorted(truth)[: a.limit or None]
    files = [os.path.join(a.dir, n) for n in names]
    grids = {}
    crops = {}
    with tempfile.TemporaryDirectory() as tmp:
        for style in ("drawn", "retro", "soft"):
            store = os.path.join(tmp, style)
            subprocess.run([a.snapthumb, "process", "-s", store, "-q", "--pixel-style", style, *files], check=True, stdout=subprocess.DEVNULL)
            for n in names:
                m = json.load(open(os.path.join(store, "manifests", n + ".json")))
                crops[n] = m["crop"]
                blob = os.path.join(store, m["variants"]["pixel25"]["path"])
                grids[(style, n)] = np.asarray(Image.open(blob).convert("RGB")).astype(float)
    if os.environ.get("FACES_ONLY"):
        names = [n for n in names if crops[n]["source"] == "faces"]
    rows = {k: [] for k in ("drawn", "retro", "soft", "average") + (("pixeloe",) if a.pixeloe else ())}
    art = {k: [] for k in rows}
    for n in names:
        c = crops[n]
        img = Image.open(os.path.join(a.dir, n)).convert("RGB")
        square = img.crop((c["left"], c["top"], c["left"] + c["width"], c["top"] + c["height"]))
        sq100 = np.asarray(square.resize((100, 100), Image.LANCZOS))
        avg = box_average(sq100, 25)
        mask = face_mask(truth[n], c["left"], c["top"], c["width"])
        if a.pixeloe:
            grids[("pixeloe", n)] = np.asarray(pixeloe_anchor.pixelize25(square).convert("RGB")).astype(float)
        grids[("average", n)] = avg
        for k in rows:
            rows[k].append(face_measures(grids[(k, n)], avg, mask))
            art[k].append(measures(grids[(k, n)], avg))
    out = {}
    for k in rows:
        faced = [r for r in rows[k] if "face_dL" in r]
        out[k] = {"photos": len(rows[k]), "photos_with_face_cells": len(faced),
                  "face_dL": round(float(np.mean([r["face_dL"] for r in faced])), 4) if faced else None,
                  "dark_in_face": round(float(np.mean([r["dark_in_face"] for r in faced])), 4) if faced else None,
                  "skin_kept": round(float(np.mean([r["skin_kept"] for r in faced])), 4) if faced else None,
                  "skin_kept_dE": round(float(np.mean([r["skin_kept_dE"] for r in faced])), 4) if faced else None,
                  "isolated_dark_per_image": round(float(np.mean([r["isolated"] for r in rows[k]])), 3)}
        out[k].update({m: round(float(np.mean([r[m] for r in art[k]])), 3) for m in ("chroma", "spread", "contrast", "colours", "drift")})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
