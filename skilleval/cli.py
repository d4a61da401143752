"""The ``skilleval`` command: tools that work outside the build graph. Each command group
lives beside the layer it serves (``add_*_command``); this module only assembles them."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from skilleval.ablation.commands import add_ablation_command
from skilleval.ablation.trainer_check import add_trainer_command
from skilleval.checkpoints.commands import add_checkpoint_command
from skilleval.errors import SkillevalError
from skilleval.logs import Interrupted, quiet_interrupts
from skilleval.serving.gpu_command import add_gpu_command
from skilleval.workflow.commands import add_archive_commands, add_stale_command
from skilleval.workflow.compare_command import add_compare_command
from skilleval.workflow.env_check import add_env_command
from skilleval.workflow.episode import add_episode_command
from skilleval.workflow.why import add_why_command
from skilleval.world.serve_command import add_serve_world


class HelpfulParser(argparse.ArgumentParser):
    """Every command's --help shows each option's default (subcommands inherit this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = HelpfulParser(prog="skilleval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_compare_command(sub)
    add_ablation_command(sub)
    add_checkpoint_command(sub)
    add_gpu_command(sub)
    add_stale_command(sub)
    add_archive_commands(sub)
    add_episode_command(sub)
    add_serve_world(sub)
    add_why_command(sub)
    add_env_command(sub)
    add_trainer_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except SkillevalError as error:
        sys.stderr.write(f"skilleval {args.command}: {error}\n")
        return 2
    except Interrupted as interrupt:
        sys.stderr.write(f"skilleval {args.command}: interrupted by {interrupt.signal_name}\n")
        return int(interrupt.code or 1)
    except BrokenPipeError:
        # The reader (head, less) closed the pipe: stop quietly, as Unix tools do, and keep
        # Python from failing again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


def run() -> None:
    """The ``skilleval`` command: an interrupt ends it in one line (skilleval.logs)."""
    quiet_interrupts()
    sys.exit(main())


if __name__ == "__main__":
    run()
