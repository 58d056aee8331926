# Summarise the layer kernel's SASS: wgmma forms and the code around the m64n256 mainloop.
import re, sys, collections
text = open(sys.argv[1]).read()
lines = [l for l in text.splitlines() if re.search(r'/\*[0-9a-f]{4,}\*/', l)]
ins = []
for l in lines:
    m = re.search(r'/\*([0-9a-f]+)\*/\s+(.*?);', l)
    if m: ins.append((m.group(1), m.group(2).strip()))
print(sys.argv[1], "instructions", len(ins))
c = collections.Counter()
for a, t in ins:
    op = t.split()[0] if not t.startswith('@') else t.split()[1]
    if op.startswith('HGMMA') or op.startswith('WARPGROUP') or op in ('STL', 'LDL', 'R2UR', 'BAR', 'SYNCS', 'UTMALDG'):
        c[op.split('.')[0] + ('.' + op.split('.')[1] if op.startswith('HGMMA') else '')] += 1
print(dict(c))
# the loop around the first 64x256 HGMMA group
idx = [i for i, (a, t) in enumerate(ins) if 'HGMMA.64x256' in t]
if idx:
    i0 = idx[0]
    for a, t in ins[max(0, i0 - 30): i0 + 20]:
        print(a, t[:110])
