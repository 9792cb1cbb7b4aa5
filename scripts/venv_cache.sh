# Sourced by scripts/setup.sh and scripts/setup_vllm.sh: a clone's venv whose
# pinned packages live in a machine-wide cache, so that a fresh clone (CI's
# every run) does not download and install gigabytes it installed before.
#
#   cached_venv NAME VENV RECIPE FILE...
#
# The packages go into $WS_CACHE/venvs/NAME-<hash>/ (scripts/env.sh), the
# hash taking in the Python version, the RECIPE text and the FILEs (the
# requirement files): a changed pin makes a new cache entry, never a mixed
# one. The caller defines `venv_install DIR`, which installs them into the
# venv DIR; it runs once per entry, under a lock, and an entry is used only
# once it completed. VENV (the clone's .venv) is then a venv of its own with
# the entry's site-packages on its path (a .pth file) and the entry's tools
# (maturin, weed, ...) linked into its bin/: what is installed into VENV
# (the clone's own weightstream wheel) stays in the clone and comes first.
cached_venv() {
  local name=$1 venv=$2 recipe=$3 hash base site py
  shift 3
  py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  hash=$( { echo "$py"; echo "$recipe"; cat "$@"; } | sha256sum | cut -c1-16)
  base=$WS_CACHE/venvs/$name-$hash
  mkdir -p "$WS_CACHE/venvs"
  (
    flock 9
    if [ ! -f "$base/.complete" ]; then
      echo "setup: installing pinned Python packages into $base (once per machine)"
      rm -rf "$base"
      python3 -m venv "$base"
      venv_install "$base"
      touch "$base/.complete"
    fi
  ) 9>"$base.lock"
  site=$(echo "$base"/lib/python3*/site-packages)
  if [ "$(cat "$venv/.ws-cache-base" 2>/dev/null || true)" != "$base" ] || [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv on $base"
    rm -rf "$venv"
    python3 -m venv --without-pip "$venv"
    # The entry's site-packages after VENV's own, its .pth files read too
    # (addsitedir). Appended unconditionally first: pip's isolated build
    # environments drop what the venv's .pth files add by re-running them
    # and removing every path they append, and addsitedir alone would not
    # append a path already present (the entry's old setuptools then leaked
    # into builds from source: llama-cpp-python's sdist failed).
    echo "import site, sys; sys.path.append('$site'); site.addsitedir('$site')" \
      >"$(echo "$venv"/lib/python3*/site-packages)/_weightstream_cache.pth"
    # The entry's tools, not its pip: a pip script of the entry's would
    # install into the shared entry (`python -m pip` in VENV installs here).
    local tool
    for tool in "$base"/bin/*; do
      case "$(basename "$tool")" in pip | pip3* | python* | activate* | Activate*) continue ;; esac
      [ -e "$venv/bin/$(basename "$tool")" ] || ln -s "$tool" "$venv/bin/$(basename "$tool")"
    done
    echo "$base" >"$venv/.ws-cache-base"
  fi
}
