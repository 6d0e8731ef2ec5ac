"""Where a registered thing (a mixer, a metric) is still named outside its home: the check of
test_mixer_files.py and test_metric_registry.py. PLACES lists those files per name today and may
only shrink; a name not listed (a new one) may be named in at most `new_limit` files."""


def places(files, pattern, home):
    """The files of {path: text} outside `home` whose text matches `pattern`."""
    return {path for path, text in files.items() if not path.startswith(home) and pattern.search(text)}


def place_problems(names, found, listed, new_limit, kind, spelled, home, remedy):
    """What breaks the rule, one line each. `found(name)`: the files naming it; `spelled(name)`: how
    a message names it; `remedy`: what to do instead of naming it."""
    problems = []
    for name in names:
        files = found(name)
        if name not in listed:
            if len(files) > new_limit:
                problems.append(f"{kind} {name} is named in {len(files)} files outside {home} "
                                f"(at most {new_limit}): {sorted(files)}; {remedy}")
            continue
        for path in sorted(files - listed[name]):
            problems.append(f"{path} names {spelled(name)}: {remedy}")
        for path in sorted(listed[name] - files):
            problems.append(f"{path} no longer names {spelled(name)}: take it off PLACES")
    problems += [f"PLACES lists {m}, which is no {kind}" for m in listed if m not in names]
    return problems
