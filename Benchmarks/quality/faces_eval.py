#!/usr/bin/env python3
"""How well the square keeps faces (issue 38), on a directory of photos with known faces.

    faces_eval.py --snapthumb .build/release/snapthumb --dir DIR [--truth FILE] [-- extra snapthumb flags]

DIR holds the photos and truth.tsv (file, width, height, then x,y,w,h per face, in the upright
original's pixels; a file with no faces is a photo without people). make_people.py writes such a
directory; real_people.py makes one from real photos with an independent detector's faces. Runs
`snapthumb process` over every file listed into a scratch store, reads each manifest's `crop`
(source and rectangle, in the original's pixels) and reports: the share of known faces at least
90 % inside the square, by face size (share of the short side) and on the photos where one
square can hold every face, the same for the plain centre
square and for the best the rule allows (the same placement rule given the true faces: all when
they fit, else the largest with as many others as fit beside it), how many photos found faces, and photos without people where a face
was reported (false positives)."""
import argparse, json, os, subprocess, tempfile


def inside(face, left, top, side):
    x, y, w, h = face
    iw = max(0.0, min(x + w, left + side) - max(x, left)); ih = max(0.0, min(y + h, top + side) - max(y, top))
    return iw * ih / (w * h)


def ideal(faces, w, h):
    """The square FaceSquare.place would choose given exactly these faces."""
    side = min(w, h); horizontal = w > h
    spans = [(f[0], f[0] + f[2]) if horizontal else (f[1], f[1] + f[3]) for f in faces]
    low, high = min(s[0] for s in spans), max(s[1] for s in spans)
    if high - low > side:
        big = max(faces, key=lambda f: f[2] * f[3])
        low, high = spans[faces.index(big)]
        best = (1, big[2] * big[3])
        for start in sorted(s[0] for s in spans):
            inside_ = [i for i, s in enumerate(spans) if s[0] >= start and s[1] <= start + side]
            if faces.index(big) not in inside_: continue
            score = (len(inside_), sum(faces[i][2] * faces[i][3] for i in inside_))
            if score > best:
                best = score; low = min(spans[i][0] for i in inside_); high = max(spans[i][1] for i in inside_)
    offset = min(max(w, h) - side, max(0, round((low + high) / 2 - side / 2)))
    return (offset, 0) if horizontal else (0, offset)


def bucket(f, side):
    share = f[3] / side
    return "<5%" if share < 0.05 else "5-10%" if share < 0.10 else "10-20%" if share < 0.20 else ">=20%"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapthumb", required=True); ap.add_argument("--dir", required=True)
    ap.add_argument("--truth", help="default DIR/truth.tsv")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    truth = {}
    for line in open(a.truth or os.path.join(a.dir, "truth.tsv")):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 3:
            truth[parts[0]] = (int(parts[1]), int(parts[2]), [tuple(map(float, p.split(","))) for p in parts[3:]])
    files = [os.path.join(a.dir, name) for name in sorted(truth)]
    with tempfile.TemporaryDirectory() as store:
        subprocess.run([a.snapthumb, "process", "-s", store, "-q", *a.extra, *files], check=True, stdout=subprocess.DEVNULL)
        manifests = {}
        for p in os.listdir(os.path.join(store, "manifests")):
            m = json.load(open(os.path.join(store, "manifests", p)))
            manifests[os.path.basename(m["key"])] = m
    kept = centre_kept = best_kept = total = found_photos = people = 0
    fit_total = fit_kept = 0  # faces of photos where one square can hold them all
    by_size = {}
    false_pos = empty = 0
    sources = {}
    for name, (w, h, faces) in sorted(truth.items()):
        m = manifests[name]
        crop = m.get("crop", {})
        sources[crop.get("source")] = sources.get(crop.get("source"), 0) + 1
        if not faces:
            empty += 1
            false_pos += 1 if crop.get("faces", 0) > 0 else 0
            continue
        people += 1
        side = min(w, h)
        found_photos += 1 if crop.get("faces", 0) > 0 else 0
        bl, bt = ideal(faces, w, h)
        all_fit = all(inside(f, bl, bt, side) >= 0.9 for f in faces)
        for f in faces:
            total += 1
            ok = "left" in crop and inside(f, crop["left"], crop["top"], crop["width"]) >= 0.9
            kept += ok
            best_kept += inside(f, bl, bt, side) >= 0.9
            centre_kept += inside(f, (w - side) / 2, (h - side) / 2, side) >= 0.9
            b = by_size.setdefault(bucket(f, side), [0, 0]); b[0] += 1; b[1] += ok
            if all_fit:
                fit_total += 1; fit_kept += ok
    print(json.dumps({"photos_with_people": people, "faces": total,
                      "kept_90pct_inside": round(kept / max(1, total), 3), "centre_kept_90pct_inside": round(centre_kept / max(1, total), 3),
                      "rule_best_90pct_inside": round(best_kept / max(1, total), 3),
                      "faces_where_all_fit": fit_total, "kept_where_all_fit": round(fit_kept / max(1, fit_total), 3),
                      "kept_by_face_size": {k: f"{v[1]}/{v[0]}" for k, v in sorted(by_size.items())},
                      "photos_with_faces_found": found_photos, "photos_without_people": empty, "false_positive_photos": false_pos,
                      "crop_sources": sources}, indent=1))


if __name__ == "__main__":
    main()
