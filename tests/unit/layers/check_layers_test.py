#!/usr/bin/env python3
"""tools/layers/check_layers.py on small trees: a clean tree passes, and each kind of
violation (one bad include or link added to that same tree) fails with its reason.

  check_layers_test.py CHECKER            the cases below, on temporary trees
  check_layers_test.py CHECKER ROOT RULES the real tree with the build's table (must pass)
"""
import os
import shutil
import subprocess
import sys
import tempfile

RULES = """\
base|protocols/base|||
crypto|crypto|base||
protocols|protocols|crypto,base||open_subfolders
log|src/log||PkgConfig::X|
io|src/io|protocols,base|log|
session|src/session|io,base|log|
"""

FILES = {
    "protocols/base/result.h": "#pragma once\n",
    "crypto/secret.h": '#pragma once\n#include "protocols/base/result.h"\n',
    "protocols/http/form.h": '#pragma once\n#include "crypto/secret.h"\n',
    "protocols/gp/auth.h": '#pragma once\n#include "protocols/http/form.h"\n',  # open sub-folders
    "src/log/logger.h": "#pragma once\n",
    "src/io/tun.h": '#pragma once\n#include "protocols/base/result.h"\n#include "protocols/gp/auth.h"\n',
    "src/io/tun.cpp": '#include "src/io/tun.h"\n#include "src/log/logger.h"\n',  # PRIVATE from a .cpp
    "src/session/core.h": '#pragma once\n#include "src/io/tun.h"\n',
    "src/session/gp/driver.h": '#pragma once\n#include "src/session/core.h"\n',  # a parent folder
    "src/session/ac/driver.cpp": "// see docs/protocols/ac.md §4.5 and docs/protocols/ac.md\n",
    "docs/protocols/ac.md": "# AC\n## 4. DTLS\n### 4.5 First packet\n",
}

# (what is added: file -> text appended, or "RULES" -> replacement table), the reason expected.
CASES = {
    "upward": ({"src/log/logger.h": '#include "src/io/tun.h"\n'}, "log may not use io"),
    "sideways_unlinked": ({"src/io/tun.cpp": '#include "src/session/core.h"\n'}, "io may not use session"),
    "private_in_header": ({"src/io/tun.h": '#include "src/log/logger.h"\n'}, "links PRIVATE only"),
    "sibling_folder": ({"src/session/gp/driver.h": '#include "src/session/ac/x.h"\n',
                        "src/session/ac/x.h": "#pragma once\n"}, "never a sibling or a child"),
    "child_folder": ({"src/session/core.h": '#include "src/session/gp/driver.h"\n'}, "never a sibling or a child"),
    "protocols_uses_src": ({"protocols/gp/auth.h": '#include "src/io/tun.h"\n'}, "protocols may not use io"),
    "crypto_uses_protocols": ({"crypto/secret.h": '#include "protocols/http/form.h"\n'},
                              "crypto may not use protocols"),
    "include_cycle": ({"src/io/a.h": '#pragma once\n#include "src/io/b.h"\n',
                       "src/io/b.h": '#pragma once\n#include "src/io/a.h"\n'}, "include cycle: src/io/a.h"),
    "folder_cycle": ({"protocols/http/url.h": '#pragma once\n#include "protocols/gp/auth.h"\n'},  # no file cycle
                     "folder cycle: protocols/"),
    "link_cycle": ({"RULES": RULES.replace("log|src/log||PkgConfig::X|", "log|src/log||session|")},
                   "the declared links form a cycle"),
    "no_such_file": ({"src/io/tun.cpp": '#include "src/io/gone.h"\n'}, "no such file"),
    "not_from_root": ({"src/io/tun.cpp": '#include "tun.h"\n'}, "by their path from the root"),
    "test_header": ({"src/io/tun.cpp": '#include "tests/unit/harness.h"\n'}, "by their path from the root"),
    "folder_in_no_layer": ({"src/extra/x.cpp": "\n"}, "in no layer"),
    "missing_doc": ({"src/io/tun.cpp": "// docs/protocols/gp.md §10.5\n"}, "cites docs/protocols/gp.md, which does not exist"),
    "missing_section": ({"src/io/tun.cpp": "// docs/protocols/ac.md §4.6\n"}, "has no heading numbered 4.6"),
}


def make_tree(root, extra):
    rules = extra.get("RULES", RULES)
    for path, text in FILES.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    for path, text in extra.items():
        if path == "RULES":
            continue
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "a") as f:
            f.write(text)
    with open(os.path.join(root, "layers.txt"), "w") as f:
        f.write(rules)


def run(checker, root, rules):
    p = subprocess.run([sys.executable, checker, "--root", root, "--rules", rules],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr


def main():
    checker = sys.argv[1]
    if len(sys.argv) == 4:  # the real tree
        rc, err = run(checker, sys.argv[2], sys.argv[3])
        print(err, end="")
        print("PASS real tree" if rc == 0 else "FAIL real tree")
        return rc
    failures = 0
    work = tempfile.mkdtemp(prefix="espvpn-layers-")
    try:
        for name, (extra, reason) in [("clean", ({}, None))] + list(CASES.items()):
            root = os.path.join(work, name)
            make_tree(root, extra)
            rc, err = run(checker, root, os.path.join(root, "layers.txt"))
            if reason is None:
                ok = rc == 0 and err == ""
            else:
                ok = rc == 1 and reason in err
            print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": rc {rc}, stderr:\n{err}"))
            failures += not ok
    finally:
        shutil.rmtree(work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
