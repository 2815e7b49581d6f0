# Base image for machines that can pull from a registry (`pgs env base --method dockerfile`).
# The debootstrap recipe (the default) builds the same thing from a Debian mirror instead.
FROM python:{{ python }}-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends {{ packages }} \
 && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8
CMD ["bash"]
LABEL {{ labels }}
