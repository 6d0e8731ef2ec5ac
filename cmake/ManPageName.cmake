# cmake -DPAGE=FILE -DNAME=rcsweep-run -P ManPageName.cmake: help2man names a page after the program
# it ran (rcsweep, rcsweep_summary.py); give the page its own name in .TH and in the NAME section.
file(READ "${PAGE}" text)
string(TOUPPER "${NAME}" upper)
string(REGEX REPLACE "\n\\.TH [^ ]+ " "\n.TH ${upper} " text "${text}")
string(REGEX REPLACE "\n\\.SH NAME\n[^\n]* \\\\- " "\n.SH NAME\n${NAME} \\\\- " text "${text}")
file(WRITE "${PAGE}" "${text}")
