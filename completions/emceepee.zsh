#compdef emceepee

_emceepee_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _EMCEEPEE_COMPLETE=complete_zsh emceepee)
}

compdef _emceepee_completion emceepee
