"""The container image's files, built without Docker the way the Dockerfile says.

`Image.assemble` reads the Dockerfile's final stage and copies what its COPY lines name (honouring
.dockerignore) into a directory that stands for the image's root; `Image.build` runs its build
step there. `Image.run` then runs a command with the image's ENV (absolute paths moved under that
root) and with only the image's files and the installed dependencies on the Python path: the
development venv's editable install points at the checkout, so its `python` runs with `-S` and
the checkout never answers an import.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shlex
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# python:3.11-slim's PATH, which `ENV PATH=/opt/venv/bin:$PATH` extends.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
TIMEOUT = 300


class ImageError(AssertionError):
    """The image as the Dockerfile describes it could not be built or does not run."""


def logical_lines(text: str) -> list[str]:
    """Lines of a Dockerfile or sh script: comments dropped (also inside a continued line, as
    Docker does), backslash continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current.strip())
    return lines


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m[1] or m[2], ""), value)


def _exec_form(args: str) -> list[str]:
    return json.loads(args) if args.startswith("[") else ["/bin/sh", "-c", args]


@dataclass(frozen=True)
class Instruction:
    """One instruction of the final stage, with the ENV and WORKDIR in force when it runs."""

    keyword: str
    args: str
    env: dict[str, str]
    workdir: str


@dataclass(frozen=True)
class Stage:
    """The final build stage: what ends up in the image and how it starts."""

    instructions: list[Instruction]
    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]

    @classmethod
    def parse(cls, text: str) -> Stage:
        lines = logical_lines(text)
        starts = [i for i, line in enumerate(lines) if line.split()[0].upper() == "FROM"]
        if not starts:
            raise ImageError("the Dockerfile has no FROM")
        env, workdir = dict(BASE_ENV), "/"
        instructions: list[Instruction] = []
        entrypoint: list[str] = []
        cmd: list[str] = []
        for line in lines[starts[-1] + 1 :]:
            keyword, _, args = line.partition(" ")
            keyword, args = keyword.upper(), args.strip()
            if keyword == "ENV":
                words = shlex.split(args)
                if "=" not in words[0]:  # the legacy `ENV KEY value` form
                    words = [f"{words[0]}={' '.join(words[1:])}"]
                # Docker expands every value against the environment before the instruction.
                before = dict(env)
                for word in words:
                    key, _, value = word.partition("=")
                    env[key] = _expand(value, before)
            elif keyword == "WORKDIR":
                workdir = str(PurePosixPath(workdir, _expand(args, env)))
            elif keyword == "ENTRYPOINT":
                entrypoint, cmd = _exec_form(args), []
            elif keyword == "CMD":
                cmd = _exec_form(args)
            elif keyword == "ADD":
                raise ImageError(f"ADD is not modelled here, use COPY: {line}")
            instructions.append(Instruction(keyword, args, dict(env), workdir))
        return cls(instructions, env, entrypoint, cmd)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


class DockerIgnore:
    """.dockerignore as Docker reads it: a pattern matches a path or any of its parent directories,
    `**` spans directories, `!` re-includes, the last matching pattern decides."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            pattern = posixpath.normpath(line.removeprefix("!").strip()).lstrip("/")
            self.rules.append((negated, re.compile(_pattern_regex(pattern))))

    @classmethod
    def read(cls, context: Path) -> DockerIgnore:
        path = context / ".dockerignore"
        return cls(path.read_text() if path.exists() else "")

    def excludes(self, relative: str) -> bool:
        parts = relative.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for negated, regex in self.rules:
            if any(regex.fullmatch(candidate) for candidate in candidates):
                excluded = not negated
        return excluded


def _pattern_regex(pattern: str) -> str:
    out, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and "]" in pattern[i:]:
            end = pattern.index("]", i)
            out += "[" + pattern[i + 1 : end].replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(char)
        i += 1
    return out


def copy_arguments(args: str) -> tuple[list[str], str]:
    words = json.loads(args) if args.startswith("[") else shlex.split(args)
    flags = [word for word in words if word.startswith("--")]
    if any(flag.startswith("--from") for flag in flags):
        raise ImageError(f"COPY --from is not modelled here: COPY {args}")
    paths = [word for word in words if not word.startswith("--")]
    return paths[:-1], paths[-1]


def _copy_file(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    target.chmod(source.stat().st_mode & 0o7777)  # Docker keeps the context's modes


def site_packages() -> list[str]:
    """Where the installed dependencies live (the image's /opt/venv holds the same pins)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


@dataclass(frozen=True)
class Entrypoint:
    """The entrypoint script's working directory and the command of each `case` arm."""

    workdir: str
    arms: dict[str, list[str]]

    @classmethod
    def parse(cls, text: str) -> Entrypoint:
        workdir, arms, current = "", {}, None
        for line in logical_lines(text):
            if match := re.fullmatch(r"([\w|*-]+)\)", line):
                current = [name.strip() for name in match[1].split("|")]
            elif line == ";;":
                current = None
            elif current is not None and line.startswith("exec "):
                for name in current:
                    arms[name] = shlex.split(line)[1:]
            elif match := re.fullmatch(r"cd\s+(\S+)", line):
                workdir = match[1]
        return cls(workdir, arms)

    def command(self, arm: str, *args: str) -> list[str]:
        """The arm's command with `"$@"` replaced by `args`."""
        argv = self.arms[arm]
        return [word for item in argv for word in (args if item == "$@" else [item])]

    def asgi_application(self) -> str:
        """The `module:attribute` the web arm serves."""
        [target] = [w for w in self.arms["web"] if re.fullmatch(r"[\w.]+:\w+", w)]
        return target

    def option(self, arm: str, flag: str) -> str:
        """The value given to `flag` in the arm's command."""
        argv = self.arms[arm]
        return argv[argv.index(flag) + 1]


@dataclass(frozen=True)
class Image:
    """The image's root filesystem in a directory, and a way to run its commands there."""

    stage: Stage
    context: Path
    rootfs: Path
    bin: Path

    @classmethod
    def assemble(cls, dockerfile: Path, *, context: Path, work: Path) -> Image:
        """Copy into `work`/rootfs what the final stage's COPY lines name, exactly as written."""
        stage = Stage.parse(dockerfile.read_text())
        image = cls(stage, context, work / "rootfs", work / "bin")
        image.rootfs.mkdir(parents=True)
        image.bin.mkdir(parents=True)
        # `-S`: no site, so no .pth file (the editable install's points at the checkout); the
        # dependencies come through PYTHONPATH (see `environment`).
        wrapper = image.bin / "python"
        wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
        wrapper.chmod(0o755)
        ignore = DockerIgnore.read(context)
        for instruction in stage.all("COPY"):
            sources, destination = copy_arguments(instruction.args)
            target = image.path(str(PurePosixPath(instruction.workdir, destination)))
            into = destination.endswith("/") or len(sources) > 1
            for source in sources:
                image._copy(source, target, into=into, ignore=ignore)
        return image

    def _copy(self, source: str, target: Path, *, into: bool, ignore: DockerIgnore) -> None:
        pattern = posixpath.normpath(source)
        matches = sorted(self.context.glob(pattern)) if glob.has_magic(pattern) else []
        if not glob.has_magic(pattern) and (self.context / pattern).exists():
            matches = [self.context / pattern]
        matches = [m for m in matches if not ignore.excludes(self._relative(m))]
        if not matches:
            raise ImageError(f"COPY {source}: not in the context, or .dockerignore excludes it")
        for match in matches:
            if match.is_file():
                _copy_file(match, target / match.name if into else target)
                continue
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted(match.rglob("*")):
                if ignore.excludes(self._relative(path)):
                    continue
                if path.is_dir():
                    (target / path.relative_to(match)).mkdir(parents=True, exist_ok=True)
                elif path.is_file():
                    _copy_file(path, target / path.relative_to(match))

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.context).as_posix()

    def path(self, image_path: str) -> Path:
        """Where an absolute path of the image lies here."""
        return self.rootfs / image_path.lstrip("/")

    def environment(
        self, image_env: dict[str, str], extra: dict[str, str] | None = None
    ) -> dict[str, str]:
        """`image_env` with absolute paths moved under the root, `extra` on top, only the
        wrapped `python` on PATH, and the dependencies after the image's own PYTHONPATH."""
        env = {
            key: ":".join(str(self.path(p)) if p.startswith("/") else p for p in value.split(":"))
            for key, value in image_env.items()
            if key != "PATH"
        }
        env.update(extra or {})
        env["PATH"] = str(self.bin)
        env["PYTHONPATH"] = ":".join(filter(None, [env.get("PYTHONPATH", ""), *site_packages()]))
        return env

    def build_step(self) -> Instruction:
        """The RUN that collects static files (and byte-compiles)."""
        runs = [i for i in self.stage.all("RUN") if "collectstatic" in i.args]
        if len(runs) != 1:
            raise ImageError(f"expected one RUN with collectstatic, found {len(runs)}")
        return runs[0]

    def build(self) -> None:
        """Run the build step as written, in its WORKDIR with its ENV; only `python` is on PATH,
        so another command it names (useradd, say) fails here instead of changing this machine."""
        step = self.build_step()
        done = subprocess.run(
            ["/bin/sh", "-c", step.args],
            cwd=self.path(step.workdir),
            env=self.environment(step.env),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        if done.returncode:
            raise ImageError(f"RUN {step.args}\nexited {done.returncode}:\n{done.stderr[-3000:]}")

    def entrypoint(self) -> tuple[Path, Entrypoint]:
        """The ENTRYPOINT's script, found on the image's PATH, and its parsed arms."""
        name = self.stage.entrypoint[0]
        directories = ["/"] if "/" in name else self.stage.env["PATH"].split(":")
        for directory in directories:
            script = self.path(str(PurePosixPath(directory, name)))
            if script.is_file():
                if not script.stat().st_mode & 0o111:
                    raise ImageError(f"{script} is not executable")
                return script, Entrypoint.parse(script.read_text())
        raise ImageError(f"ENTRYPOINT {name!r} is on no directory of the image's PATH")

    def run(self, argv: list[str], *, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """Run a python command of the image where the entrypoint runs its arms (its `cd`)."""
        _, entrypoint = self.entrypoint()
        executable = self.bin / argv[0]
        if not executable.exists():
            raise ImageError(f"{argv[0]}: only python commands are run here")
        return subprocess.run(
            [str(executable), *argv[1:]],
            cwd=self.path(entrypoint.workdir or self.stage.instructions[-1].workdir),
            env=self.environment(self.stage.env, env),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    def files(self) -> dict[str, tuple[int, int]]:
        """Every file under the root with its size and modification time."""
        found = {}
        for path in self.rootfs.rglob("*"):
            if path.is_file():
                stat = path.stat()
                found[path.relative_to(self.rootfs).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return found


def probe_allowed_roots(image: Image) -> list[str]:
    """Where a module imported in the image may come from: its files, the venv, the stdlib."""
    roots = {str(image.rootfs), sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return sorted(os.path.realpath(root) for root in roots)
