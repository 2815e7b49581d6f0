# Repository image: the base image + the repository at one commit + its Python dependencies.
# Built with networking off: every package comes from the wheelhouse copied in at /wheels.
# Few steps on purpose: each one costs a container commit (seconds on a busy machine).
FROM {{ base }}
ENV PIP_NO_INDEX=1 \
    PIP_FIND_LINKS=/wheels \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /repo
# root/ holds repo/ (a git clone at the commit), wheels/ and etc/pgs-gitignore.
COPY root/ /
# --ignore-installed: Debian's pip/setuptools/wheel cannot be uninstalled; /usr/local shadows them.
# Files the install leaves behind (build folders, generated files) must not show up in a patch.
RUN git config --system --add safe.directory '*' \
 && git config --system core.excludesFile /etc/pgs-gitignore \
 && git config --system user.name pgs \
 && git config --system user.email pgs@localhost \
 && python3 -m pip install --ignore-installed pip setuptools wheel \
{% for marker, command in install %}
 && printf '%s\n' {{ marker }} && ({{ command }}) \
{% endfor %}
 && git ls-files --others --exclude-standard | sed 's|^|/|' >> .git/info/exclude
LABEL {{ labels }}
