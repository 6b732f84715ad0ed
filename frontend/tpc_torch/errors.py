"""The one error type of the frontend: a message of one line that the command lines print as
`tpc_torch.<tool>: error: <message>` before exiting with status 2."""


class ExportError(Exception):
    """A model, plan or option that the frontend cannot export; str() is the whole message."""


def source_line(node):
    """The innermost frame of an FX node's stack trace as 'path:line: code', or '' when the node has
    none. Paths are shortened to start at the package (transformers/..., torch/...)."""
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    for i in range(len(trace) - 1, -1, -1):
        line = trace[i].strip()
        if line.startswith('File "'):
            path, _, rest = line[len('File "'):].partition('", line ')
            number = rest.split(",")[0]
            for marker in ("site-packages/", "dist-packages/"):
                if marker in path:
                    path = path.split(marker, 1)[1]
            code = trace[i + 1].strip() if i + 1 < len(trace) else ""
            return f"{path}:{number}: {code}" if code else f"{path}:{number}"
    return ""
