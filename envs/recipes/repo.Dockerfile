# Repository image: the base image + the repository at one commit + its Python dependencies.
# Built with networking off: every package comes from the wheelhouse copied in at /wheels.
FROM {{ base }}
ENV PIP_NO_INDEX=1 \
    PIP_FIND_LINKS=/wheels \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1
COPY pgs-gitignore /etc/pgs-gitignore
COPY wheels /wheels
RUN git config --system --add safe.directory '*' \
 && git config --system core.excludesFile /etc/pgs-gitignore \
 && git config --system user.name pgs \
 && git config --system user.email pgs@localhost \
 && python3 -m pip install --upgrade pip setuptools wheel
COPY repo /repo
WORKDIR /repo
{% for command in install %}
RUN {{ command }}
{% endfor %}
# Files the install left behind (build folders, generated files) must not show up in a patch.
RUN git ls-files --others --exclude-standard | sed 's|^|/|' >> .git/info/exclude
LABEL {{ labels }}
