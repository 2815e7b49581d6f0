# Like windowed_edit_linting's install.sh: writes WINDOW from the environment, which may be unset.
_kv_put WINDOW "$WINDOW"
_kv_put OPEN_FILE ""
