"""The journal: emceepee's SQLite file, the state that outlives a process and the CLI's channel."""
