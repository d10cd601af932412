"""Config-layer errors.

Every rejection is one line that starts with the YAML path of the offending value
(`jobs[1].workers[2]: unknown host 'h9'`), so the CLI can print it as is and exit 2."""


class ConfigError(ValueError):
    """A bad experiment file; the message names the YAML path."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.detail = message
        super().__init__(f"{path}: {message}" if path else message)
