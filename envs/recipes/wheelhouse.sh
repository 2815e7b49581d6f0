# Fills /wheels with every distribution the repository image installs, resolved by the
# target interpreter. Runs in a throwaway container of the base image on the host network.
set -euo pipefail
step() { echo "### step: $*"; }
cd /src
step "pip download (pip, setuptools, wheel)"
python3 -m pip download --quiet -d /wheels pip setuptools wheel
step "pip upgrade in the download container"
# --ignore-installed: Debian's own copies (no RECORD file) cannot be uninstalled; shadow them.
python3 -m pip install --quiet --no-index --find-links /wheels --ignore-installed pip setuptools wheel
{% if build_requires %}
step "pip download (build requirements)"
python3 -m pip download --progress-bar off -d /wheels {{ build_requires }}
# The backend may ask for more when it builds (hatchling wants `editables` for an editable
# install): ask it, with its requirements installed here, and download those too.
step "requirements the build backend asks for"
python3 -m pip install --quiet --ignore-installed --find-links /wheels build {{ build_requires }}
python3 - <<'PY'
import build

builder = build.ProjectBuilder("/src")
wanted = set()
for distribution in ("wheel", "editable"):
    wanted |= set(builder.get_requires_for_build(distribution))
with open("/tmp/backend-requires.txt", "w") as out:  # the backend itself prints to stdout
    out.write("".join(line + "\n" for line in sorted(wanted)))
PY
if [ -s /tmp/backend-requires.txt ]; then
  python3 -m pip download --progress-bar off -d /wheels -r /tmp/backend-requires.txt
fi
{% endif %}
step "pip download (dependencies)"
python3 -m pip download --progress-bar off -d /wheels {{ requirements }}
# An sdist would need its build backend at install time, offline: build it into a wheel now.
shopt -s nullglob
set -- /wheels/*.tar.gz /wheels/*.zip
if [ $# -gt 0 ]; then
  step "pip wheel (source distributions)"
  python3 -m pip wheel --progress-bar off --no-deps -w /wheels "$@"
  rm -f "$@"
fi
chown -R {{ owner }} /wheels
