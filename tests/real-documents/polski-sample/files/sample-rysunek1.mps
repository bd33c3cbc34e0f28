%!PS
%%BoundingBox: -68 -59 126 85 
%%Creator: MetaPost
%%CreationDate: 2007.12.18:1421
%%Pages: 1
%*Font: plbx8 7.97011 7.97011 78:c
%*Font: plr6 5.97758 5.97758 31:e
%*Font: plmi6 5.97758 5.97758 61:8
%*Font: plsy8 7.97011 7.97011 00:8000000000000000000003
%%EndProlog
%%Page: 1 1
 0 0.5 dtransform truncate idtransform setlinewidth pop [] 0 setdash
 1 setlinecap 1 setlinejoin 10 setmiterlimit
newpath 0 0 moveto
113.38562 0 lineto stroke
newpath 109.69006 -1.53079 moveto
113.38562 0 lineto
109.69006 1.53079 lineto
 closepath
gsave fill grestore stroke
 0.5 0 dtransform exch truncate exch idtransform pop setlinewidth
newpath 0 0 moveto
0 76.5353 lineto stroke
 0 0.5 dtransform truncate idtransform setlinewidth pop
newpath 1.5307 72.83994 moveto
0 76.5353 lineto
-1.5307 72.83994 lineto
 closepath
gsave fill grestore stroke
newpath 0 0 moveto
-62.36209 -51.02353 lineto stroke
newpath -60.47151 -47.49905 moveto
-62.36209 -51.02353 lineto
-58.53307 -49.86826 lineto
 closepath
gsave fill grestore stroke
newpath 0 0 moveto
68.03206 38.26765 lineto stroke
newpath 65.56187 35.1221 moveto
68.03206 38.26765 lineto
64.06114 37.79016 lineto
 closepath
gsave fill grestore stroke
newpath 0 0 moveto
85.03922 -25.51176 lineto stroke
newpath 81.0592 -25.91614 moveto
85.03922 -25.51176 lineto
81.93903 -22.98334 lineto
 closepath
gsave fill grestore stroke
116.38562 -1.226 moveto
(x) plbx8 7.97011 fshow
121.53851 -2.3163 moveto
(2) plr6 5.97758 fshow
-67.0141 -57.56583 moveto
(x) plbx8 7.97011 fshow
-61.8612 -58.65613 moveto
(1) plr6 5.97758 fshow
37.67696 -19.29819 moveto
(y) plbx8 7.97011 fshow
42.82985 -20.2945 moveto
(a) plmi6 5.97758 fshow
-4.65201 80.6256 moveto
(x) plbx8 7.97011 fshow
0.50089 79.5353 moveto
(3) plr6 5.97758 fshow
31.37178 23.68355 moveto
(y) plbx8 7.97011 fshow
newpath 85.03922 -25.51176 moveto
68.03206 38.26765 lineto stroke
newpath 70.46307 35.09163 moveto
68.03206 38.26765 lineto
67.50519 34.3029 lineto
 closepath
gsave fill grestore stroke
77.83482 11.12347 moveto
(y) plbx8 7.97011 fshow
85.00522 11.12347 moveto
(\000) plsy8 7.97011 fshow
93.47362 11.12347 moveto
(y) plbx8 7.97011 fshow
98.62653 10.12717 moveto
(a) plmi6 5.97758 fshow
20.97786 -33.95796 moveto
(W) plsy8 7.97011 fshow
99.10027 60.4351 moveto
(V) plsy8 7.97011 fshow
showpage
%%EOF
