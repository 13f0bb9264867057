"""`brain agent install` and `uninstall`: brain wired into Claude Code's own files.

What install writes (and uninstall takes back, leaving everything else as it was):
- In ``settings.json`` (the user's: ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; a project's:
  ``DIR/.claude``), one ``SessionStart`` and one ``SessionEnd`` command hook, in Claude Code's
  schema ``{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": …,
  "timeout": s}]}]}}``, appended to the arrays already there (no ``matcher``: every start,
  resume, clear and compaction gets the block).
- The ``brain`` MCP server (`brain mcp`): a project's ``DIR/.mcp.json``, or for the user the
  top-level ``mcpServers`` of ``.claude.json`` (in ``$CLAUDE_CONFIG_DIR``, else the home folder),
  which is where Claude Code keeps user-scope servers; ``~/.mcp.json`` is not read as one.
- The connection file the hooks read (server URL, token, memory), mode 0600, always under the
  user's Claude Code folder (``brain/user.json``, ``brain/project-<hash>.json``), so a token
  never lands in a project's files. It also keeps what uninstall needs: the files and folders
  install brought into being, and the auto memory setting as it was. The folders every install
  shares (``brain/`` and the Claude Code folder above it, when install made them) are kept in
  ``brain/folders.json`` and go with the last connection file.
- ``"autoMemoryEnabled": false`` in the same ``settings.json``: Claude Code's own auto memory
  off (seed 000: there is one memory, and a person can read all of it). Uninstall puts back
  what was there (the value, or no key), unless the person has changed it since.

Rules: every path is absolute and native (Claude Code does not expand ``$HOME`` in
settings.json, so a placeholder would install cleanly and never fire). A file that is not the
JSON shape Claude Code reads is refused, naming it, before anything is written. Each file is
written whole to a temporary file and renamed, then read back to check the entry landed.
Running install twice changes nothing the second time; an entry for brain's hook with an older
path (the checkout moved) is updated in place rather than added again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SERVER_NAME = "brain"
EVENTS = {"SessionStart": "session-start", "SessionEnd": "session-end"}
# SessionStart: the hook bounds its own wait to 2 s; this only caps a hook gone wrong.
# SessionEnd: Claude Code gives end hooks 1.5 s unless one declares more; asking the server
# for the sleep pass takes well under that, the margin is for a slow machine.
TIMEOUTS = {"SessionStart": 10, "SessionEnd": 10}
CREATED = "created_by_install"  # in the connection file: Claude Code files install created
FOLDERS = "folders_created_by_install"  # and the folders, deepest first
SHARED_FOLDERS = "folders.json"  # beside the connection files: the folders they all share
AUTO_MEMORY = "autoMemoryEnabled"  # Claude Code's own memory, in settings.json
AUTO_MEMORY_BEFORE = "auto_memory_before"  # in the connection file: {"had": bool, "was": …}
OURS = re.compile(r"agent[/\\]hooks\.py['\"]? (session-start|session-end)\b")


class CannotInstall(Exception):
    """One line naming the file and the problem; nothing was written."""


@dataclass(frozen=True)
class Target:
    """Where one install writes."""

    scope: str  # "user" or "project"
    settings: Path
    mcp: Path
    connection: Path


def claude_config_dir(environ=os.environ) -> Path:
    configured = environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured).expanduser().absolute()
    home = environ.get("HOME") or str(Path.home())
    return Path(home).absolute() / ".claude"


def user_target(environ=os.environ) -> Target:
    config = claude_config_dir(environ)
    mcp_home = config if environ.get("CLAUDE_CONFIG_DIR") else config.parent
    return Target(
        scope="user",
        settings=config / "settings.json",
        mcp=mcp_home / ".claude.json",
        connection=config / "brain" / "user.json",
    )


def project_target(directory: str | Path, environ=os.environ) -> Target:
    project = Path(directory).expanduser().absolute()
    if not project.is_dir():
        raise CannotInstall(f"{project} is not a folder: --project names the project's folder.")
    digest = hashlib.sha256(str(project).encode()).hexdigest()[:12]
    return Target(
        scope="project",
        settings=project / ".claude" / "settings.json",
        mcp=project / ".mcp.json",
        connection=claude_config_dir(environ) / "brain" / f"project-{digest}.json",
    )


@dataclass(frozen=True)
class Wiring:
    """What the entries point at: absolute paths of this checkout, and the connection."""

    python: str  # the interpreter the hooks run with
    hooks_script: str  # agent/hooks.py
    brain: str  # bin/brain, for the MCP server
    url: str
    token: str
    memory: str
    user: str = ""  # the person the MCP server records writes under
    budget: int = 600

    def hook_command(self, event: str, connection: Path) -> str:
        # -I: no PYTHON* variables, no user site, no script folder on sys.path; -S: no site
        # import. The hook needs only the standard library, and starts faster without them.
        parts = [self.python, "-I", "-S", self.hooks_script, EVENTS[event], "--config"]
        return " ".join(shlex.quote(part) for part in [*parts, str(connection)])

    def mcp_entry(self) -> dict:
        args = ["mcp"]
        if self.memory:
            args += ["--memory", self.memory]
        if self.user:
            args += ["--user", self.user]
        return {"type": "stdio", "command": self.brain, "args": args}

    def connection_data(self) -> dict:
        return {"url": self.url, "token": self.token, "memory": self.memory, "budget": self.budget}


@dataclass
class Done:
    """What install or uninstall did, one sentence a line, as the command prints it."""

    lines: list[str] = field(default_factory=list)
    changed: bool = False

    def did(self, line: str) -> None:
        self.lines.append(line)
        self.changed = True

    def kept(self, line: str) -> None:
        self.lines.append(line)

    @property
    def message(self) -> str:
        return "\n".join(self.lines) if self.lines else "Nothing to change."


# Reading and writing Claude Code's files --------------------------------------------------------


def _read(path: Path) -> tuple[dict, bool]:
    """The JSON object in ``path`` ({} when the file is missing or empty), and whether the
    file exists. Raises CannotInstall for anything else."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, False
    except OSError as error:
        raise CannotInstall(f"Cannot read {path}: {error.strerror}.") from None
    if not raw.strip():
        return {}, True
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise CannotInstall(
            f"{path} is not valid JSON (line {error.lineno}): fix it first; nothing was changed."
        ) from None
    if not isinstance(data, dict):
        raise CannotInstall(f"{path} does not hold a JSON object; nothing was changed.")
    return data, True


def _listed(data: dict, key: str) -> list:
    """``data[key]`` when it is a list, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, list) else []


def _write(path: Path, data: dict, *, private: bool = False) -> None:
    """Write ``data`` whole, through a temporary file and a rename, keeping the file's mode."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600 if private else 0o644
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2, ensure_ascii=False)
                out.write("\n")
            os.chmod(temporary, 0o600 if private else mode)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise CannotInstall(f"Cannot write {path}: {error.strerror}.") from None


def _hook_groups(settings: dict, path: Path, event: str) -> list:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise CannotInstall(f'{path}: "hooks" is not an object; nothing was changed.')
    groups = hooks.get(event, [])
    if not isinstance(groups, list):
        raise CannotInstall(f'{path}: "hooks.{event}" is not a list; nothing was changed.')
    return groups


def _is_ours(hook: object, event: str) -> bool:
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    found = OURS.search(hook["command"])
    return found is not None and found.group(1) == EVENTS[event]


def _our_hooks(groups: list, event: str) -> list[dict]:
    return [
        hook
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"]
        if _is_ours(hook, event)
    ]


def _mcp_servers(data: dict, path: Path) -> dict:
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise CannotInstall(f'{path}: "mcpServers" is not an object; nothing was changed.')
    return servers


def _is_our_server(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("command"), str)
        and Path(entry["command"]).name == "brain"
        and (entry.get("args") or [None])[0] == "mcp"
    )


# Install --------------------------------------------------------------------------------------


def install(*, target: Target, wiring: Wiring) -> Done:
    """Wire brain into ``target``. Safe to run twice. Raises CannotInstall; a file that is not
    what Claude Code reads is refused before anything is written."""
    done = Done()
    settings, settings_exist = _read(target.settings)
    mcp, mcp_exists = _read(target.mcp)
    record, _ = _read(target.connection)
    for event in EVENTS:
        _hook_groups(settings, target.settings, event)
    servers = _mcp_servers(mcp, target.mcp)
    existing = servers.get(SERVER_NAME)
    if existing is not None and not _is_our_server(existing):
        raise CannotInstall(
            f'{target.mcp} already has an MCP server called "{SERVER_NAME}" that is not '
            "brain's: rename it first. Nothing was changed."
        )

    # The files and folders install brings into being, so that uninstall can take them away.
    created = set(_listed(record, CREATED))
    created |= {str(target.settings)} if not settings_exist else set()
    created |= {str(target.mcp)} if not mcp_exists else set()
    shared_file = target.connection.parent / SHARED_FOLDERS
    shared = [str(folder) for folder in _missing_folders(target.connection)]
    folders = _listed(record, FOLDERS)
    for path in (target.settings, target.mcp):
        folders += [
            str(folder)
            for folder in _missing_folders(path)
            if str(folder) not in folders and str(folder) not in shared
        ]
    if shared:
        _write(shared_file, {FOLDERS: _deepest_first(shared)}, private=True)
    # Claude Code's auto memory as the person had it, kept from the first install.
    before = record.get(AUTO_MEMORY_BEFORE)
    if not isinstance(before, dict):
        before = {"had": AUTO_MEMORY in settings, "was": settings.get(AUTO_MEMORY)}
    wanted = {
        **wiring.connection_data(),
        CREATED: sorted(created),
        FOLDERS: _deepest_first(folders),
        AUTO_MEMORY_BEFORE: before,
    }
    if record != wanted:
        _write(target.connection, wanted, private=True)
        done.did(
            f"Wrote {target.connection}: server {wiring.url}, memory "
            f"{wiring.memory or '(the default one)'}; readable by you only."
        )
    else:
        done.kept(f"Already there: the connection in {target.connection}.")
    _check(target.connection, lambda data: data == wanted)

    commands = {event: wiring.hook_command(event, target.connection) for event in EVENTS}
    settings_changed = False
    if settings.get(AUTO_MEMORY) is not False:
        settings[AUTO_MEMORY] = False
        settings_changed = True
        done.did(
            f"Turned Claude Code's auto memory off in {target.settings} ({AUTO_MEMORY}: false): "
            "brain is the one memory; uninstall puts it back."
        )
    for event, command in commands.items():
        groups = settings.setdefault("hooks", {}).setdefault(event, [])
        ours = _our_hooks(groups, event)
        if any(hook["command"] == command for hook in ours):
            done.kept(f"Already there: the {event} hook in {target.settings}.")
            continue
        if ours:
            ours[0]["command"] = command
            done.did(f"Updated the {event} hook in {target.settings}: {command}")
        else:
            hook = {"type": "command", "command": command, "timeout": TIMEOUTS[event]}
            groups.append({"hooks": [hook]})
            done.did(f"Added the {event} hook to {target.settings}: {command}")
        settings_changed = True
    if settings_changed:
        _write(target.settings, settings)
    _check(
        target.settings,
        lambda data: (
            data[AUTO_MEMORY] is False
            and all(
                any(hook["command"] == command for hook in _our_hooks(data["hooks"][event], event))
                for event, command in commands.items()
            )
        ),
    )

    entry = wiring.mcp_entry()
    if existing == entry:
        done.kept(f'Already there: the MCP server "{SERVER_NAME}" in {target.mcp}.')
    else:
        servers[SERVER_NAME] = entry
        mcp["mcpServers"] = servers
        _write(target.mcp, mcp)
        verb = "Updated" if existing is not None else "Added"
        done.did(
            f'{verb} the MCP server "{SERVER_NAME}" in {target.mcp}: '
            f"{' '.join(shlex.quote(part) for part in [entry['command'], *entry['args']])}"
        )
    _check(target.mcp, lambda data: data["mcpServers"][SERVER_NAME] == entry)
    return done


def _deepest_first(folders: list[str]) -> list[str]:
    return sorted(folders, key=lambda folder: -folder.count(os.sep))


def _missing_folders(path: Path) -> list[Path]:
    """The folders above ``path`` that do not exist yet, which writing it will make."""
    missing = []
    for folder in path.parents:
        if folder.exists():
            break
        missing.append(folder)
    return missing


def _check(path: Path, landed, *, gone_is_fine: bool = False) -> None:
    """Read ``path`` back and make sure it says what was written: a write that did not land (a
    full disk, another program rewriting the file at that moment) is said, not assumed."""
    try:
        data, exists = _read(path)
        ok = (not exists and gone_is_fine) or (exists and landed(data))
    except (CannotInstall, KeyError, TypeError):
        ok = False
    if not ok:
        raise CannotInstall(f"Wrote {path}, but reading it back it does not hold the change.")


# Uninstall ------------------------------------------------------------------------------------


def uninstall(*, target: Target) -> Done:
    """Take out exactly what install added to ``target``: brain's two hooks (and a group or an
    array left holding nothing else), the "brain" MCP server when it is brain's, the connection
    file, and a Claude Code file install created that is now empty. Every other entry stays.
    Safe to run twice. Raises CannotInstall before writing anything when a file is refused."""
    done = Done()
    settings, settings_exist = _read(target.settings)
    mcp, _ = _read(target.mcp)
    record, _ = _read(target.connection)
    created = _listed(record, CREATED)
    folders = _listed(record, FOLDERS)
    groups = {event: _hook_groups(settings, target.settings, event) for event in EVENTS}
    servers = _mcp_servers(mcp, target.mcp)

    restored = _restore_auto_memory(settings, record.get(AUTO_MEMORY_BEFORE))
    removed = [event for event in EVENTS if _our_hooks(groups[event], event)]
    for event in removed:
        left = []
        for group in groups[event]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [hook for hook in group["hooks"] if not _is_ours(hook, event)]
                if group["hooks"] and not kept:
                    continue  # the group held brain's hook only
                group = {**group, "hooks": kept}
            left.append(group)
        if left:
            settings["hooks"][event] = left
        else:
            del settings["hooks"][event]
    if removed or restored:
        if "hooks" in settings and not settings["hooks"]:
            del settings["hooks"]
        gone = _put_back(target.settings, settings, created)
        _check(
            target.settings,
            lambda data: (
                not any(_our_hooks(data.get("hooks", {}).get(event, []), event) for event in EVENTS)
            ),
            gone_is_fine=gone,
        )
        for event in removed:
            done.did(f"Removed the {event} hook from {target.settings}.")
        if restored:
            done.did(f"Put Claude Code's auto memory back as it was in {target.settings}.")
        if gone:
            done.did(f"Removed {target.settings}: install had created it, and it is empty now.")
    elif settings_exist:
        done.kept(f"No brain hooks in {target.settings}.")

    if _is_our_server(servers.get(SERVER_NAME)):
        del servers[SERVER_NAME]
        if not servers:
            mcp.pop("mcpServers", None)
        gone = _put_back(target.mcp, mcp, created)
        _check(
            target.mcp,
            lambda data: SERVER_NAME not in data.get("mcpServers", {}),
            gone_is_fine=gone,
        )
        done.did(f'Removed the MCP server "{SERVER_NAME}" from {target.mcp}.')
        if gone:
            done.did(f"Removed {target.mcp}: install had created it, and it is empty now.")
    elif SERVER_NAME in servers:
        done.kept(f'The MCP server "{SERVER_NAME}" in {target.mcp} is not brain\'s, so it stays.')

    if target.connection.exists():
        try:
            target.connection.unlink()
        except OSError as error:
            raise CannotInstall(f"Cannot remove {target.connection}: {error.strerror}.") from None
        done.did(f"Removed {target.connection}.")
    folders += _last_connection_gone(target.connection.parent)
    for folder in map(Path, folders):
        if folder.is_dir() and not any(folder.iterdir()):
            try:
                folder.rmdir()
            except OSError as error:
                raise CannotInstall(f"Cannot remove {folder}: {error.strerror}.") from None
            done.did(f"Removed {folder}: install had created it, and it is empty now.")
    return done


def _last_connection_gone(connections: Path) -> list[str]:
    """The folders installs share (``SHARED_FOLDERS``), once no connection file is left beside
    it; the connections' own folder goes when it is empty."""
    shared_file = connections / SHARED_FOLDERS
    try:
        if any(path != shared_file for path in connections.iterdir()):
            return []
    except FileNotFoundError:
        return []
    shared, _ = _read(shared_file)
    shared_file.unlink(missing_ok=True)
    listed = _listed(shared, FOLDERS)
    return _deepest_first([str(connections), *(f for f in listed if f != str(connections))])


def _restore_auto_memory(settings: dict, before: object) -> bool:
    """Put Claude Code's auto memory back as install found it; True when that changed
    ``settings``. A value the person set after install (anything but the false install wrote)
    is theirs, and stays."""
    if not isinstance(before, dict) or settings.get(AUTO_MEMORY) is not False:
        return False
    if before.get("had"):
        if before.get("was") is False:
            return False
        settings[AUTO_MEMORY] = before.get("was")
    else:
        del settings[AUTO_MEMORY]
    return True


def _put_back(path: Path, data: dict, created: list) -> bool:
    """Write what is left; a file install created and left empty goes, as it came. True when
    the file was removed."""
    if data or str(path) not in created:
        _write(path, data)
        return False
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        raise CannotInstall(f"Cannot remove {path}: {error.strerror}.") from None
    return True
