"""Compile tables with pdflatex and print each one's problems (reprokit.report.render.latex_check).

python -m reprokit.report.commands.check_latex figures/table1.tex figures/table2.tex
"""

from __future__ import annotations

from ..render.latex_check import check_latex


def main(argv: list[str] | None = None) -> int:
    """python -m reprokit.report.commands.check_latex FILE.tex ...: compile each table (`check_latex`) and print
    its problems."""
    import argparse
    import tempfile

    p = argparse.ArgumentParser(prog="python -m reprokit.report.commands.check_latex", description=main.__doc__)
    p.add_argument("tex", nargs="+")
    p.add_argument("--max-overfull", type=float, default=3.0)
    args = p.parse_args(argv)
    bad = 0
    for tex in args.tex:
        with tempfile.TemporaryDirectory(prefix="reprokit-latex-") as tmp:
            check = check_latex(tex, tmp)
        problems = check.problems(args.max_overfull)
        shrink = ", ".join(f"{s:.2f}" for s in check.shrink) or "none"
        height = ", ".join(f"{h:.0f}pt" for h in check.float_pt) or "n/a"
        print(
            f"{tex}: {'; '.join(problems) if problems else 'ok'} (shrunk: {shrink}; height {height} of "
            f"{check.text_height_pt:.0f}pt; caption {check.caption_chars} characters)"
        )
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
