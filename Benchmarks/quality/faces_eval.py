#!/usr/bin/env python3
"""How well the square keeps faces (issue 38), on make_people.py's photos.

    faces_eval.py --snapthumb .build/release/snapthumb --dir DIR [-- extra snapthumb flags]

Runs `snapthumb process` over DIR's people-*.jpg and empty-*.jpg into a scratch store, reads each
manifest's `crop` (source and rectangle, in the original's pixels) and reports: the share of
known faces at least 90 % inside the square, the same for the plain centre square, how many
photos found faces, and photos without people where a face was reported (false positives)."""
import argparse, glob, json, os, subprocess, sys, tempfile


def inside(face, left, top, side):
    x, y, w, h = face
    iw = max(0.0, min(x + w, left + side) - max(x, left)); ih = max(0.0, min(y + h, top + side) - max(y, top))
    return iw * ih / (w * h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapthumb", required=True); ap.add_argument("--dir", required=True)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    truth = {}
    for line in open(os.path.join(a.dir, "truth.tsv")):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 3:
            truth[parts[0]] = (int(parts[1]), int(parts[2]), [tuple(map(float, p.split(","))) for p in parts[3:]])
    files = sorted(glob.glob(os.path.join(a.dir, "people-*.jpg")) + glob.glob(os.path.join(a.dir, "empty-*.jpg")))
    with tempfile.TemporaryDirectory() as store:
        subprocess.run([a.snapthumb, "process", "-s", store, "-q", *a.extra, *files], check=True, stdout=subprocess.DEVNULL)
        manifests = {os.path.basename(p)[:-5]: json.load(open(p)) for p in glob.glob(os.path.join(store, "manifests", "*.json"))}
    kept = centre_kept = total = found_photos = 0
    big = big_kept = 0  # faces at least 10 % of the short side
    false_pos = empty = 0
    sources = {}
    for name, m in sorted(manifests.items()):
        crop = m.get("crop", {})
        sources[crop.get("source")] = sources.get(crop.get("source"), 0) + 1
        if name.startswith("empty-"):
            empty += 1
            false_pos += 1 if crop.get("faces", 0) > 0 else 0
            continue
        w, h, faces = truth[name]
        side = min(w, h)
        found_photos += 1 if crop.get("faces", 0) > 0 else 0
        for f in faces:
            total += 1
            ok = "left" in crop and inside(f, crop["left"], crop["top"], crop["width"]) >= 0.9
            kept += ok
            if f[3] >= 0.1 * side:
                big += 1; big_kept += ok
            centre_kept += inside(f, (w - side) / 2, (h - side) / 2, side) >= 0.9
    people = len(manifests) - empty
    print(json.dumps({"photos_with_people": people, "faces": total,
                      "kept_90pct_inside": round(kept / max(1, total), 3), "centre_kept_90pct_inside": round(centre_kept / max(1, total), 3),
                      "faces_over_10pct": big, "kept_over_10pct": round(big_kept / max(1, big), 3),
                      "photos_with_faces_found": found_photos, "photos_without_people": empty, "false_positive_photos": false_pos,
                      "crop_sources": sources}, indent=1))


if __name__ == "__main__":
    main()
