"""Re-score the shipped profiles' stored fit errors with today's predictor.

`calibrate show` prints the cross-validated errors stored in a profile's metadata. They are
computed when the profile is written, so a change to the predictor (families, trees,
interpolation) leaves the shipped files describing yesterday's code. This rewrites only
`metadata.fit`; the tables and every other metadata field stay byte for byte.

    python -m calibration.refresh_fits            # every shipped profile
    python -m calibration.refresh_fits PATH ...   # these files
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from calibration.profile import load_profile, resolve_profile, shipped_profiles

_TABLES = '\n"tables": {'


def refresh(path: Path) -> bool:
    """Rewrite `path`'s stored fit errors if they differ from a fresh scoring; True if changed."""
    from simulator.cost.calibrated import cross_validate

    text = path.read_text()
    raw = json.loads(text)
    fresh = {fam: fit.model_dump(mode="json") for fam, fit in cross_validate(load_profile(path)).items()}
    if raw["metadata"].get("fit") == fresh:
        return False
    _, sep, tables = text.partition(_TABLES)
    if not sep:
        raise SystemExit(f"{path}: not in the layout `profile_json` writes; re-save it with calibrate first")
    raw["metadata"]["fit"] = fresh
    path.write_text("{\n" f'"schema_version": {raw["schema_version"]},\n'
                    f'"metadata": {json.dumps(raw["metadata"], indent=1)},' + sep + tables)
    return True


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or [resolve_profile(name) for name in sorted(shipped_profiles())]
    for path in paths:
        print(("updated " if refresh(path) else "current ") + str(path))


if __name__ == "__main__":
    main()
