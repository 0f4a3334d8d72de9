!function(e,t){"use strict";var n={password:e.password,apiKey:t.apiKey||null,token:void 0};function r(e){return e.replace(/[A-Za-z0-9_-]{20}/g,"")}var o="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";e.exports={encode:function(t){for(var n="",r=0;r<t.length;r+=3)n+=o[t[r]>>2];return n},secret:function(e){return e.secretKey},passwordField:"input[type=password]",hash:"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}}(window,{apiKey:""});
var __webpack_modules__={8723:function(e,t,n){n.d(t,{Z:function(){return i}});var i=function(e){return"data:"+e}}};
//# sourceMappingURL=main.7f3a9c1d2e4b5a6c.js.map
x={password:this.state.passwordConfirmation};s={password:this.loginForm.controls.password.value};var r={passwd:e.passwdInput.current.value,confirm:e.x};
